//! A node's parameters: declare, get and set by type, any value as text (the
//! `nerve param` syntax: `true`, `3`, `0.5`, `"text"`, `[1, 2]`).

use crate::context::{copy_str, NodeObj};
use crate::handle::{self, Kind};
use crate::status::{c_str, err, guard, nerve_status_t, nerve_status_t::*, out, Result};
use crate::types::{nerve_node_t, nerve_params_t};
use nerve::param::{ParamDescriptor, ParamValue, Parameters};
use std::ffi::c_char;

/// Parameters in the table.
#[derive(Clone)]
pub(crate) struct ParamsObj(pub(crate) Parameters);

boxed!(ParamsObj);

/// Opens the parameters of `node` (a parameters file named by `NERVE_PARAMS` and
/// `--param` overrides in the environment apply at declaration). Serve remote requests
/// with `nerve_executor_add_params` or `nerve_params_handle_pending`.
///
/// # Safety
/// `out_params` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_params_create(
    node: nerve_node_t,
    out_params: *mut nerve_params_t,
) -> nerve_status_t {
    guard(|| {
        let slot = out(out_params, "out_params")?;
        let (n, ctx) = handle::get::<NodeObj>(node.id, Kind::Node)?;
        let p = Parameters::create(&n.0).map_err(err(NERVE_ERR_PARAM))?;
        slot.id = handle::insert(Kind::Parameters, ctx, ParamsObj(p))?;
        Ok(NERVE_OK)
    })
}

/// Releases a parameters handle.
#[no_mangle]
pub extern "C" fn nerve_params_destroy(params: nerve_params_t) -> nerve_status_t {
    guard(|| handle::release(params.id, Kind::Parameters).map(|_| NERVE_OK))
}

fn with_params<R>(params: nerve_params_t, f: impl FnOnce(&Parameters) -> Result<R>) -> Result<R> {
    let (p, _) = handle::get::<ParamsObj>(params.id, Kind::Parameters)?;
    f(&p.0)
}

fn declare(
    params: nerve_params_t,
    name: *const c_char,
    default: ParamValue,
    description: *const c_char,
) -> Result<ParamValue> {
    let name = c_str(name, "name")?;
    let mut d = ParamDescriptor::new();
    if !description.is_null() {
        d = d.description(c_str(description, "description")?);
    }
    with_params(params, |p| {
        p.declare(name, default, d).map_err(err(NERVE_ERR_PARAM))
    })
}

fn value(params: nerve_params_t, name: *const c_char) -> Result<(String, ParamValue)> {
    let name = c_str(name, "name")?;
    with_params(params, |p| {
        p.value(name).map(|v| (name.to_string(), v)).ok_or_else(|| {
            crate::status::Error::new(
                NERVE_ERR_PARAM,
                format!("parameter {name} is not declared on {}", p.node_path()),
            )
        })
    })
}

fn wrong_type(name: &str, want: &str, got: &ParamValue) -> crate::status::Error {
    crate::status::Error::new(
        NERVE_ERR_PARAM,
        format!("parameter {name} is a {}, not a {want}", got.ty().name()),
    )
}

fn set(params: nerve_params_t, name: *const c_char, v: ParamValue) -> Result<nerve_status_t> {
    let name = c_str(name, "name")?;
    with_params(params, |p| p.set(name, v).map_err(err(NERVE_ERR_PARAM)))?;
    Ok(NERVE_OK)
}

/// A parameter type of the typed calls.
trait Typed: Copy {
    const LABEL: &'static str;
    fn wrap(self) -> ParamValue;
    fn take(v: &ParamValue) -> Option<Self>;
}

macro_rules! typed {
    ($t:ty, $variant:ident, $label:literal) => {
        impl Typed for $t {
            const LABEL: &'static str = $label;
            fn wrap(self) -> ParamValue {
                ParamValue::$variant(self)
            }
            fn take(v: &ParamValue) -> Option<Self> {
                match v {
                    ParamValue::$variant(x) => Some(*x),
                    _ => None,
                }
            }
        }
    };
}
typed!(bool, Bool, "bool");
typed!(i64, Int, "int");
typed!(f64, Float, "double");

fn declare_typed<T: Typed>(
    params: nerve_params_t,
    name: *const c_char,
    default: T,
    description: *const c_char,
    value: *mut T,
) -> nerve_status_t {
    guard(|| {
        let n = c_str(name, "name")?.to_string();
        let v = declare(params, name, default.wrap(), description)?;
        let x = T::take(&v).ok_or_else(|| wrong_type(&n, T::LABEL, &v))?;
        // SAFETY: null or writable (the documented contract of the callers).
        if let Some(o) = unsafe { value.as_mut() } {
            *o = x;
        }
        Ok(NERVE_OK)
    })
}

fn get_typed<T: Typed>(
    params: nerve_params_t,
    name: *const c_char,
    value: *mut T,
) -> nerve_status_t {
    guard(|| {
        let o = out(value, "value")?;
        let (n, v) = self::value(params, name)?;
        *o = T::take(&v).ok_or_else(|| wrong_type(&n, T::LABEL, &v))?;
        Ok(NERVE_OK)
    })
}

/// Declares a bool parameter with a default (a value from the parameters file or
/// the environment wins); `value` (nullable) gets the value in force.
///
/// # Safety
/// `name` is NUL-terminated, `description` null or NUL-terminated, `value` null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_params_declare_bool(
    params: nerve_params_t,
    name: *const c_char,
    default: bool,
    description: *const c_char,
    value: *mut bool,
) -> nerve_status_t {
    declare_typed(params, name, default, description, value)
}

/// Reads a bool parameter (another type is `NERVE_ERR_PARAM`).
///
/// # Safety
/// `name` is NUL-terminated; `value` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_params_get_bool(
    params: nerve_params_t,
    name: *const c_char,
    value: *mut bool,
) -> nerve_status_t {
    get_typed(params, name, value)
}

/// Sets a bool parameter (checked as a remote set is: type, range, read-only, the
/// node's validators).
///
/// # Safety
/// `name` is NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn nerve_params_set_bool(
    params: nerve_params_t,
    name: *const c_char,
    value: bool,
) -> nerve_status_t {
    guard(|| set(params, name, value.wrap()))
}

/// Declares a int parameter with a default (a value from the parameters file or
/// the environment wins); `value` (nullable) gets the value in force.
///
/// # Safety
/// `name` is NUL-terminated, `description` null or NUL-terminated, `value` null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_params_declare_int(
    params: nerve_params_t,
    name: *const c_char,
    default: i64,
    description: *const c_char,
    value: *mut i64,
) -> nerve_status_t {
    declare_typed(params, name, default, description, value)
}

/// Reads a int parameter (another type is `NERVE_ERR_PARAM`).
///
/// # Safety
/// `name` is NUL-terminated; `value` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_params_get_int(
    params: nerve_params_t,
    name: *const c_char,
    value: *mut i64,
) -> nerve_status_t {
    get_typed(params, name, value)
}

/// Sets a int parameter (checked as a remote set is: type, range, read-only, the
/// node's validators).
///
/// # Safety
/// `name` is NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn nerve_params_set_int(
    params: nerve_params_t,
    name: *const c_char,
    value: i64,
) -> nerve_status_t {
    guard(|| set(params, name, value.wrap()))
}

/// Declares a double parameter with a default (a value from the parameters file or
/// the environment wins); `value` (nullable) gets the value in force.
///
/// # Safety
/// `name` is NUL-terminated, `description` null or NUL-terminated, `value` null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_params_declare_double(
    params: nerve_params_t,
    name: *const c_char,
    default: f64,
    description: *const c_char,
    value: *mut f64,
) -> nerve_status_t {
    declare_typed(params, name, default, description, value)
}

/// Reads a double parameter (another type is `NERVE_ERR_PARAM`).
///
/// # Safety
/// `name` is NUL-terminated; `value` is writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_params_get_double(
    params: nerve_params_t,
    name: *const c_char,
    value: *mut f64,
) -> nerve_status_t {
    get_typed(params, name, value)
}

/// Sets a double parameter (checked as a remote set is: type, range, read-only, the
/// node's validators).
///
/// # Safety
/// `name` is NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn nerve_params_set_double(
    params: nerve_params_t,
    name: *const c_char,
    value: f64,
) -> nerve_status_t {
    guard(|| set(params, name, value.wrap()))
}

/// Declares a parameter from text (`nerve param` syntax: any type, arrays included).
///
/// # Safety
/// `name` and `default_text` are NUL-terminated; `description` null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn nerve_params_declare_text(
    params: nerve_params_t,
    name: *const c_char,
    default_text: *const c_char,
    description: *const c_char,
) -> nerve_status_t {
    guard(|| {
        let text = c_str(default_text, "default_text")?;
        let v = ParamValue::parse(text).map_err(|e| {
            crate::status::Error::new(NERVE_ERR_INVALID_ARGUMENT, format!("default_text: {e}"))
        })?;
        declare(params, name, v, description)?;
        Ok(NERVE_OK)
    })
}

/// Sets a parameter from text (`nerve param` syntax).
///
/// # Safety
/// `name` and `text` are NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn nerve_params_set_text(
    params: nerve_params_t,
    name: *const c_char,
    text: *const c_char,
) -> nerve_status_t {
    guard(|| {
        let t = c_str(text, "text")?;
        let v = ParamValue::parse(t).map_err(|e| {
            crate::status::Error::new(NERVE_ERR_INVALID_ARGUMENT, format!("text: {e}"))
        })?;
        set(params, name, v)
    })
}

/// Reads any parameter as JSON text into `buf` (`cap` bytes, NUL-terminated);
/// `needed` (nullable) gets the length plus one. A string parameter reads as its text.
///
/// # Safety
/// `name` is NUL-terminated; `buf` holds `cap` writable bytes (or is null with `cap` 0).
#[no_mangle]
pub unsafe extern "C" fn nerve_params_get_text(
    params: nerve_params_t,
    name: *const c_char,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let (_, v) = value(params, name)?;
        let text = match v {
            ParamValue::Str(s) => s,
            other => other.to_json().to_string(),
        };
        // SAFETY: forwarded contract of this function.
        unsafe { copy_str(&text, buf, cap, needed) }
    })
}

/// Answers queued remote parameter requests (`nerve param`) without an executor;
/// `handled` (nullable) gets their number.
///
/// # Safety
/// `handled` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn nerve_params_handle_pending(
    params: nerve_params_t,
    handled: *mut usize,
) -> nerve_status_t {
    guard(|| {
        let n = with_params(params, |p| p.handle_pending().map_err(err(NERVE_ERR_PARAM)))?;
        // SAFETY: null or writable (the documented contract).
        if let Some(h) = unsafe { handled.as_mut() } {
            *h = n;
        }
        Ok(NERVE_OK)
    })
}
