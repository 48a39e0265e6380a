//! A node's parameters: declarations, checks and the all-or-nothing set, without I/O.

use super::error::ParamError;
use super::value::{ParamType, ParamValue};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Most parameters one node holds.
pub const MAX_PARAMS: usize = 4096;
/// Largest single value in bytes.
pub const MAX_VALUE_BYTES: usize = 1 << 20;
/// Largest name in bytes.
pub const MAX_NAME_LEN: usize = 200;

/// A numeric range: `min <= v <= max`, and `v = min + k * step` when `step > 0`.
/// Applies to integers, floats and their arrays (element by element).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamRange {
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Step from `min` (0: any value in range).
    pub step: f64,
}

/// How a parameter is declared: its documentation and constraints.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ParamDescriptor {
    /// What it is for (shown by `nerve param describe`).
    pub description: String,
    /// Allowed numbers.
    pub range: Option<ParamRange>,
    /// Set once at declaration (from the default or a parameter file), never after.
    pub read_only: bool,
    /// Accept a value of any type on set (opt-in; by default the type is fixed).
    pub dynamic_typing: bool,
}

impl ParamDescriptor {
    /// An unconstrained descriptor.
    pub fn new() -> ParamDescriptor {
        ParamDescriptor::default()
    }
    /// Sets the description.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = text.into();
        self
    }
    /// Allows values from `min` to `max`, in steps of `step` (0: any).
    pub fn range(mut self, min: f64, max: f64, step: f64) -> Self {
        self.range = Some(ParamRange { min, max, step });
        self
    }
    /// Makes it read-only.
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }
    /// Lets a set change its type.
    pub fn dynamic_typing(mut self) -> Self {
        self.dynamic_typing = true;
        self
    }
}

/// One parameter change, as callbacks and the parameter-events topic see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamChange {
    /// The parameter.
    pub name: String,
    /// Its value before (`None`: it is new).
    pub old: Option<ParamValue>,
    /// Its value after.
    pub new: ParamValue,
}

/// A declared parameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamInfo {
    /// Its name.
    pub name: String,
    /// Its type (fixed unless the descriptor allows dynamic typing).
    pub ty: ParamType,
    /// Its current value.
    pub value: ParamValue,
    /// Its declaration.
    pub descriptor: ParamDescriptor,
}

/// Checks a parameter name: segments of letters, digits and `_` joined by `.`.
pub fn check_name(name: &str) -> Result<(), ParamError> {
    let err = |reason| ParamError::InvalidName {
        name: name.to_string(),
        reason,
    };
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(err("must be 1 to 200 bytes"));
    }
    for seg in name.split('.') {
        let mut c = seg.chars();
        if !c
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            || !c.all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(err(
                "segments start with a letter or '_' and hold letters, digits and '_', joined by '.'",
            ));
        }
    }
    Ok(())
}

#[derive(Default)]
pub(crate) struct ParamStore {
    entries: BTreeMap<String, ParamInfo>,
    /// Values from parameter files, taken by `declare` (bounded by the files' size).
    overrides: HashMap<String, ParamValue>,
    /// Sets may create parameters that were never declared (dynamically typed).
    pub(crate) allow_undeclared: bool,
}

impl ParamStore {
    pub(crate) fn set_overrides(&mut self, values: Vec<(String, ParamValue)>) {
        self.overrides.extend(values);
    }

    pub(crate) fn get(&self, name: &str) -> Option<&ParamInfo> {
        self.entries.get(name)
    }

    pub(crate) fn names(&self, prefix: &str) -> Vec<String> {
        self.entries
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect()
    }

    pub(crate) fn all(&self) -> impl Iterator<Item = &ParamInfo> {
        self.entries.values()
    }

    /// Declares `name` with `default`, or the value a parameter file gave it (which must
    /// pass the same checks). Returns the value it now has.
    pub(crate) fn declare(
        &mut self,
        name: &str,
        default: ParamValue,
        descriptor: ParamDescriptor,
    ) -> Result<ParamChange, ParamError> {
        check_name(name)?;
        if self.entries.contains_key(name) {
            return Err(ParamError::AlreadyDeclared { name: name.into() });
        }
        if self.entries.len() >= MAX_PARAMS {
            return Err(ParamError::Limit {
                what: format!("declaring {name:?}: parameters on this node"),
                max: MAX_PARAMS,
            });
        }
        let ty = default.ty();
        let mut info = ParamInfo {
            name: name.to_string(),
            ty,
            value: default.clone(),
            descriptor,
        };
        info.value = check(&info, default)?;
        if let Some(v) = self.overrides.remove(name) {
            info.value = check(&info, v)?;
            info.ty = if info.descriptor.dynamic_typing {
                info.value.ty()
            } else {
                ty
            };
        }
        let change = ParamChange {
            name: name.to_string(),
            old: None,
            new: info.value.clone(),
        };
        self.entries.insert(name.to_string(), info);
        Ok(change)
    }

    /// Checks a set of changes without applying them: every one must pass, else the
    /// first failure is returned.
    pub(crate) fn check_all(
        &self,
        values: Vec<(String, ParamValue)>,
    ) -> Result<Vec<ParamChange>, ParamError> {
        if values.len() > MAX_PARAMS {
            return Err(ParamError::Limit {
                what: format!("a set of {} values", values.len()),
                max: MAX_PARAMS,
            });
        }
        let mut out: Vec<ParamChange> = Vec::with_capacity(values.len());
        // where each name sits in `out`: a name given twice keeps its later value
        let mut index: HashMap<String, usize> = HashMap::with_capacity(values.len());
        let mut new_entries = 0;
        for (name, value) in values {
            check_name(&name)?;
            let change = match self.entries.get(&name) {
                Some(info) => {
                    if info.descriptor.read_only {
                        return Err(ParamError::ReadOnly { name });
                    }
                    ParamChange {
                        new: check(info, value)?,
                        old: Some(info.value.clone()),
                        name,
                    }
                }
                None if self.allow_undeclared => {
                    check_size(&name, &value)?;
                    new_entries += 1;
                    ParamChange {
                        name,
                        old: None,
                        new: value,
                    }
                }
                None => return Err(ParamError::NotDeclared { name }),
            };
            // a name given twice: the later value wins, as it would applied in order
            match index.get(&change.name) {
                Some(&k) => {
                    if change.old.is_none() {
                        new_entries -= 1;
                    }
                    out[k] = change;
                }
                None => {
                    index.insert(change.name.clone(), out.len());
                    out.push(change);
                }
            }
        }
        if self.entries.len() + new_entries > MAX_PARAMS {
            return Err(ParamError::Limit {
                what: "parameters on this node".into(),
                max: MAX_PARAMS,
            });
        }
        Ok(out)
    }

    /// Applies changes [`check_all`](Self::check_all) accepted.
    pub(crate) fn apply(&mut self, changes: &[ParamChange]) {
        for c in changes {
            match self.entries.get_mut(&c.name) {
                Some(info) => {
                    info.value = c.new.clone();
                    if info.descriptor.dynamic_typing {
                        info.ty = c.new.ty();
                    }
                }
                None => {
                    self.entries.insert(
                        c.name.clone(),
                        ParamInfo {
                            name: c.name.clone(),
                            ty: c.new.ty(),
                            value: c.new.clone(),
                            descriptor: ParamDescriptor::new().dynamic_typing(),
                        },
                    );
                }
            }
        }
    }
}

fn check_size(name: &str, value: &ParamValue) -> Result<(), ParamError> {
    if value.size() > MAX_VALUE_BYTES {
        return Err(ParamError::Limit {
            what: format!("parameter {name:?}: {} bytes", value.size()),
            max: MAX_VALUE_BYTES,
        });
    }
    Ok(())
}

/// `value` as parameter `info` would hold it: its type (widened), its range.
fn check(info: &ParamInfo, value: ParamValue) -> Result<ParamValue, ParamError> {
    check_size(&info.name, &value)?;
    let got = value.ty();
    let value = if info.descriptor.dynamic_typing {
        value
    } else {
        value.coerce(info.ty).ok_or(ParamError::WrongType {
            name: info.name.clone(),
            expected: info.ty,
            got,
        })?
    };
    if let Some(r) = info.descriptor.range {
        let numbers: Vec<f64> = match &value {
            ParamValue::Int(i) => vec![*i as f64],
            ParamValue::Float(f) => vec![*f],
            ParamValue::IntArray(v) => v.iter().map(|&i| i as f64).collect(),
            ParamValue::FloatArray(v) => v.clone(),
            _ => Vec::new(),
        };
        for x in numbers {
            let off_step = r.step > 0.0 && {
                let k = (x - r.min) / r.step;
                (k - k.round()).abs() > 1e-9 * k.abs().max(1.0)
            };
            if !(r.min..=r.max).contains(&x) || off_step {
                let step = if r.step > 0.0 {
                    format!(" in steps of {}", r.step)
                } else {
                    String::new()
                };
                return Err(ParamError::OutOfRange {
                    name: info.name.clone(),
                    value: x.to_string(),
                    reason: format!("outside {} to {}{step}", r.min, r.max),
                });
            }
        }
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> ParamStore {
        let mut s = ParamStore::default();
        s.declare(
            "speed",
            1.0.into(),
            ParamDescriptor::new().range(0.0, 2.0, 0.5),
        )
        .unwrap();
        s.declare("name", "r1".into(), ParamDescriptor::new().read_only())
            .unwrap();
        s.declare("count", 3i64.into(), ParamDescriptor::new())
            .unwrap();
        s
    }

    #[test]
    fn checks_type_range_step_and_read_only() {
        let s = store();
        let one = |n: &str, v: ParamValue| s.check_all(vec![(n.into(), v)]);
        assert!(one("speed", 2i64.into()).is_ok(), "an integer widens");
        assert!(matches!(
            one("speed", 2.5.into()),
            Err(ParamError::OutOfRange { .. })
        ));
        assert!(matches!(
            one("speed", 0.7.into()),
            Err(ParamError::OutOfRange { .. })
        ));
        assert!(matches!(
            one("count", 1.5.into()),
            Err(ParamError::WrongType { .. })
        ));
        assert!(matches!(
            one("name", "x".into()),
            Err(ParamError::ReadOnly { .. })
        ));
        assert!(matches!(
            one("nope", 1i64.into()),
            Err(ParamError::NotDeclared { .. })
        ));
        assert!(matches!(
            one("bad name", 1i64.into()),
            Err(ParamError::InvalidName { .. })
        ));
    }

    #[test]
    fn one_bad_value_fails_the_whole_set() {
        let mut s = store();
        let r = s.check_all(vec![
            ("speed".into(), 1.5.into()),
            ("count".into(), "x".into()),
        ]);
        assert!(r.is_err());
        let ok = s
            .check_all(vec![
                ("speed".into(), 1.5.into()),
                ("count".into(), 4i64.into()),
            ])
            .unwrap();
        s.apply(&ok);
        assert_eq!(s.get("speed").unwrap().value, ParamValue::Float(1.5));
        assert_eq!(s.get("count").unwrap().value, ParamValue::Int(4));
    }

    #[test]
    fn file_values_pass_the_declared_checks() {
        let mut s = ParamStore::default();
        s.set_overrides(vec![
            ("speed".into(), 1i64.into()),
            ("limit".into(), 9.0.into()),
        ]);
        let c = s
            .declare("speed", 0.5.into(), ParamDescriptor::new())
            .unwrap();
        assert_eq!(
            c.new,
            ParamValue::Float(1.0),
            "YAML `1` sets a float parameter"
        );
        assert!(s
            .declare(
                "limit",
                1.0.into(),
                ParamDescriptor::new().range(0.0, 5.0, 0.0)
            )
            .is_err());
    }

    #[test]
    fn undeclared_sets_only_when_allowed() {
        let mut s = ParamStore::default();
        assert!(s.check_all(vec![("x".into(), 1i64.into())]).is_err());
        s.allow_undeclared = true;
        let c = s.check_all(vec![("x".into(), 1i64.into())]).unwrap();
        s.apply(&c);
        let c = s.check_all(vec![("x".into(), "now text".into())]).unwrap();
        s.apply(&c);
        assert_eq!(s.get("x").unwrap().ty, ParamType::Str);
    }
}
