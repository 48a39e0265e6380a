//! Default values of message types ([`Value::default_for`]).

use crate::definition::{BaseType, Container, Field, MessageDefinition, PrimitiveType};
use crate::name::TypeName;
use crate::parse::values_to_array;
use crate::registry::{Registry, RegistryError, MAX_NESTING_DEPTH};
use crate::value::{Array, Struct, Value};

/// Most array elements a default value may contain in total (guards against definitions like
/// `Big[16777216]` nested in each other).
pub const MAX_DEFAULT_ELEMENTS: usize = 1 << 24;

pub(crate) struct Defaults<'r> {
    pub(crate) reg: &'r Registry,
    pub(crate) budget: usize,
    pub(crate) root: &'r TypeName,
}

impl Defaults<'_> {
    fn spend(&mut self, n: usize) -> Result<(), RegistryError> {
        if n > self.budget {
            return Err(RegistryError::TooLarge {
                name: self.root.to_string(),
                limit: MAX_DEFAULT_ELEMENTS,
            });
        }
        self.budget -= n;
        Ok(())
    }

    pub(crate) fn structure(
        &mut self,
        def: &MessageDefinition,
        depth: usize,
    ) -> Result<Struct, RegistryError> {
        if depth > MAX_NESTING_DEPTH {
            return Err(RegistryError::TooDeep {
                name: def.name.to_string(),
                limit: MAX_NESTING_DEPTH,
            });
        }
        if def.is_empty_placeholder() {
            return Ok(Struct::new());
        }
        let mut fields = Vec::with_capacity(def.fields.len());
        for f in &def.fields {
            fields.push((f.name.clone(), self.field(&def.name, f, depth)?));
        }
        Ok(Struct { fields })
    }

    pub(crate) fn field(
        &mut self,
        owner: &TypeName,
        f: &Field,
        depth: usize,
    ) -> Result<Value, RegistryError> {
        if let Some(d) = &f.default {
            return Ok(d.clone());
        }
        match f.ty.container {
            Container::Single => self.single(owner, &f.ty.base, depth),
            Container::Array(n) => self
                .filled(owner, &f.ty.base, n as usize, depth)
                .map(Value::Array),
            Container::BoundedSequence(_) | Container::Sequence => {
                Ok(Value::Array(values_to_array(&f.ty.base, Vec::new())))
            }
        }
    }

    fn single(
        &mut self,
        owner: &TypeName,
        base: &BaseType,
        depth: usize,
    ) -> Result<Value, RegistryError> {
        Ok(match base {
            BaseType::Primitive(p) => zero(*p),
            BaseType::String { .. } => Value::String(String::new()),
            BaseType::WString { .. } => Value::WString(String::new()),
            BaseType::Nested(t) => {
                let def = self.reg.resolve_name(t, Some(owner))?;
                Value::Struct(self.structure(def, depth + 1)?)
            }
        })
    }

    /// `n` default elements of `base`.
    pub(crate) fn filled(
        &mut self,
        owner: &TypeName,
        base: &BaseType,
        n: usize,
        depth: usize,
    ) -> Result<Array, RegistryError> {
        self.spend(n)?;
        use PrimitiveType as P;
        Ok(match base {
            BaseType::Primitive(p) => match p {
                P::Bool => Array::Bool(vec![false; n]),
                P::Byte | P::Char | P::UInt8 => Array::UInt8(vec![0; n]),
                P::Int8 => Array::Int8(vec![0; n]),
                P::Int16 => Array::Int16(vec![0; n]),
                P::UInt16 => Array::UInt16(vec![0; n]),
                P::Int32 => Array::Int32(vec![0; n]),
                P::UInt32 => Array::UInt32(vec![0; n]),
                P::Int64 => Array::Int64(vec![0; n]),
                P::UInt64 => Array::UInt64(vec![0; n]),
                P::Float32 => Array::Float32(vec![0.0; n]),
                P::Float64 => Array::Float64(vec![0.0; n]),
            },
            BaseType::String { .. } => Array::String(vec![String::new(); n]),
            BaseType::WString { .. } => Array::WString(vec![String::new(); n]),
            BaseType::Nested(t) => {
                let def = self.reg.resolve_name(t, Some(owner))?;
                let mut v = Vec::with_capacity(n.min(4096));
                for _ in 0..n {
                    v.push(self.structure(def, depth + 1)?);
                }
                Array::Struct(v)
            }
        })
    }
}

/// The zero value of a primitive type.
pub(crate) fn zero(p: PrimitiveType) -> Value {
    use PrimitiveType as P;
    match p {
        P::Bool => Value::Bool(false),
        P::Byte | P::Char | P::UInt8 => Value::UInt8(0),
        P::Int8 => Value::Int8(0),
        P::Int16 => Value::Int16(0),
        P::UInt16 => Value::UInt16(0),
        P::Int32 => Value::Int32(0),
        P::UInt32 => Value::UInt32(0),
        P::Int64 => Value::Int64(0),
        P::UInt64 => Value::UInt64(0),
        P::Float32 => Value::Float32(0.0),
        P::Float64 => Value::Float64(0.0),
    }
}

impl Value {
    /// The default value of message type `type_name`: field defaults from the definition
    /// where given, otherwise zero / empty string / empty sequence / filled fixed arrays /
    /// nested defaults.
    pub fn default_for(registry: &Registry, type_name: &str) -> Result<Value, RegistryError> {
        let def = registry.resolve(type_name)?;
        let mut d = Defaults {
            reg: registry,
            budget: MAX_DEFAULT_ELEMENTS,
            root: &def.name,
        };
        Ok(Value::Struct(d.structure(def, 0)?))
    }
}
