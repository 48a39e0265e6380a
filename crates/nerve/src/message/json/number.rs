//! The number rules of every JSON path: how a field's number is written as JSON and read
//! back. Nerve's schemas ([`super`]), ROS 2 definitions (`nerve-ros2-types`) and Python
//! all use these, so what `nerve topic echo` prints, `nerve topic pub` reads back as the
//! same bits.
//!
//! - Floats print as the shortest decimal that reads back to the same value (an `f32` as
//!   the shortest for `f32`: `0.1`, not `0.10000000149011612`) and read back exactly (the
//!   parser rounds once, correctly: serde_json's `float_roundtrip`). `-0.0` stays `-0.0`,
//!   subnormals stay.
//! - NaN, +inf and -inf are the strings [`NAN`], [`INFINITY`] and [`NEG_INFINITY`]
//!   (`"NaN"`, `"Infinity"`, `"-Infinity"`; `"nan"`, `"inf"` and `"-inf"` are read too).
//!   A NaN's sign and payload bits are not kept: every NaN reads back as the canonical
//!   NaN.
//! - A finite number too large for an `f32` field is an error, not infinity.
//! - Integers are JSON numbers, exact over their whole range (`u64`/`i64` too, beyond
//!   2^53), or decimal strings (how 128-bit integers print); a value outside the field's
//!   range, a fraction or a boolean is an error.
//! - `true`/`false` are read only for fields that are booleans.

use serde_json::{Number, Value};

/// How NaN is written in JSON.
pub const NAN: &str = "NaN";
/// How +inf is written in JSON.
pub const INFINITY: &str = "Infinity";
/// How -inf is written in JSON.
pub const NEG_INFINITY: &str = "-Infinity";

/// A JSON value that is not a number of the field's type; the caller names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumberError {
    /// A value of the wrong kind (a string for a number, a fraction for an integer, ...).
    #[error("expected {expected}, found {found}")]
    WrongKind {
        /// What the field needs.
        expected: String,
        /// The JSON found (abbreviated).
        found: String,
    },
    /// A number outside the field type's range.
    #[error("{value} is out of range for {ty}")]
    OutOfRange {
        /// The number as given.
        value: String,
        /// The field's type (`u8`, `f32`, ...).
        ty: &'static str,
    },
}

/// The JSON of `v` in an error message, cut to about 40 characters.
pub fn describe(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(37) {
        Some((i, _)) if s.len() > 40 => format!("{}...", &s[..i]),
        _ => s,
    }
}

fn wrong(expected: &str, v: &Value) -> NumberError {
    NumberError::WrongKind {
        expected: expected.to_string(),
        found: describe(v),
    }
}

/// An `f64` as JSON: the shortest decimal that reads back to it, or the string for NaN
/// and the infinities.
pub fn f64_to_json(x: f64) -> Value {
    match Number::from_f64(x) {
        Some(n) => Value::Number(n),
        None if x.is_nan() => Value::String(NAN.into()),
        None if x > 0.0 => Value::String(INFINITY.into()),
        None => Value::String(NEG_INFINITY.into()),
    }
}

/// An `f32` as JSON: the shortest decimal that reads back to it as an `f32`.
pub fn f32_to_json(x: f32) -> Value {
    if !x.is_finite() {
        return f64_to_json(f64::from(x));
    }
    // Rust prints the shortest decimal that reads back as this f32; the f64 nearest that
    // decimal prints as the same digits
    let shortest = x.to_string().parse::<f64>().unwrap_or(f64::from(x));
    f64_to_json(shortest)
}

/// An `f64` field's value from JSON: a number (read exactly), or one of the strings for
/// NaN and the infinities.
pub fn f64_from_json(v: &Value) -> Result<f64, NumberError> {
    const EXPECTED: &str = "a number, \"NaN\", \"Infinity\" or \"-Infinity\"";
    match v {
        // u64 and i64 convert to the nearest f64, as their decimal text would
        Value::Number(n) => n.as_f64().ok_or_else(|| wrong(EXPECTED, v)),
        Value::String(s) => match s.as_str() {
            NAN | "nan" => Ok(f64::NAN),
            INFINITY | "inf" => Ok(f64::INFINITY),
            NEG_INFINITY | "-inf" => Ok(f64::NEG_INFINITY),
            _ => Err(wrong(EXPECTED, v)),
        },
        _ => Err(wrong(EXPECTED, v)),
    }
}

/// An `f32` field's value from JSON, as [`f64_from_json`] reads it, then [`f32_from_f64`];
/// what [`f32_to_json`] printed reads back as the same `f32`.
///
/// The number is read as the nearest `f64` first, so a decimal whose nearest `f64` is the
/// exact midpoint of two `f32`s could round twice to the wrong one (`7.038531e-26`, the
/// shortest decimal of an `f32`, is one): there the `f32` whose shortest decimal reads as
/// that `f64` is taken, otherwise the even one.
pub fn f32_from_json(v: &Value) -> Result<f32, NumberError> {
    let x = f64_from_json(v)?;
    let y = f32_from_f64(x).map_err(|_| NumberError::OutOfRange {
        value: describe(v),
        ty: "f32",
    })?;
    if !y.is_finite() || f64::from(y) == x {
        return Ok(y);
    }
    let other = if f64::from(y) < x {
        y.next_up()
    } else {
        y.next_down()
    };
    // both are f32s: their sum and half are exact in f64
    let midpoint = (f64::from(y) + f64::from(other)) / 2.0;
    let printed = |z: f32| z.to_string().parse::<f64>().ok();
    Ok(
        if x == midpoint && other.is_finite() && printed(other) == Some(x) {
            other
        } else {
            y
        },
    )
}

/// An `f64` as an `f32` field's value, rounded to the nearest `f32`; a finite value that
/// rounds to infinity (beyond `f32::MAX` by half a unit in the last place or more) is an
/// error. NaN and the infinities stay what they are.
pub fn f32_from_f64(x: f64) -> Result<f32, NumberError> {
    let y = x as f32;
    if x.is_finite() && y.is_infinite() {
        return Err(NumberError::OutOfRange {
            value: x.to_string(),
            ty: "f32",
        });
    }
    Ok(y)
}

/// A `bool` field's value from JSON: `true` or `false`.
pub fn bool_from_json(v: &Value) -> Result<bool, NumberError> {
    v.as_bool().ok_or_else(|| wrong("true or false", v))
}

/// An integer field's value from JSON (a number or a decimal string), checked against
/// the range of `T`, whose name `ty` is (`u8`, `i64`, ...).
pub fn int_from_json<T>(v: &Value, ty: &'static str) -> Result<T, NumberError>
where
    T: TryFrom<i128> + TryFrom<u128>,
{
    let expected = || format!("an integer ({ty})");
    let range = || NumberError::OutOfRange {
        value: describe(v),
        ty,
    };
    let from_i = |i: i128| <T as TryFrom<i128>>::try_from(i).map_err(|_| range());
    let from_u = |u: u128| <T as TryFrom<u128>>::try_from(u).map_err(|_| range());
    match v {
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => from_i(i.into()),
            (None, Some(u)) => from_u(u.into()),
            // a fraction, or an integer written with an exponent or a decimal point
            _ => Err(wrong(&expected(), v)),
        },
        Value::String(s) => match (s.parse::<i128>(), s.parse::<u128>()) {
            (Ok(i), _) => from_i(i),
            (Err(_), Ok(u)) => from_u(u),
            // digits beyond the 128-bit range are out of range, anything else is no integer
            _ if is_decimal_integer(s) => Err(range()),
            _ => Err(wrong(&expected(), v)),
        },
        // a flag held in an integer field: say what it takes
        Value::Bool(b) => Err(NumberError::WrongKind {
            expected: expected(),
            found: format!("{b} (this field takes {} for {b})", u8::from(*b)),
        }),
        _ => Err(wrong(&expected(), v)),
    }
}

fn is_decimal_integer(s: &str) -> bool {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Prints `x` as JSON text and reads the text back, as echo and pub do.
    fn f64_through_text(x: f64) -> f64 {
        let text = f64_to_json(x).to_string();
        let v: Value = serde_json::from_str(&text).unwrap();
        f64_from_json(&v).unwrap()
    }

    fn f32_through_text(x: f32) -> f32 {
        let text = f32_to_json(x).to_string();
        let v: Value = serde_json::from_str(&text).unwrap();
        f32_from_json(&v).unwrap()
    }

    #[test]
    fn f64_text_is_read_exactly() {
        // serde_json's default parser reads this one unit in the last place off
        let v: Value = serde_json::from_str("0.9364630260594403").unwrap();
        assert_eq!(f64_from_json(&v).unwrap(), 0.9364630260594403_f64);
        assert_eq!(
            f64_to_json(0.9364630260594403).to_string(),
            "0.9364630260594403"
        );
    }

    #[test]
    fn every_kind_of_f64_survives_print_and_read() {
        for x in [
            0.9364630260594403,
            0.1,
            -0.0,
            0.0,
            f64::MIN_POSITIVE / 2.0,
            5e-324,
            -5e-324,
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::MIN,
            f64::EPSILON,
            1e300,
            9007199254740993.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            let back = f64_through_text(x);
            assert_eq!(back.to_bits(), x.to_bits(), "{x:e} came back as {back:e}");
        }
        assert!(f64_through_text(f64::NAN).is_nan());
        assert_eq!(f64_to_json(f64::NAN), json!("NaN"));
        assert_eq!(f64_to_json(f64::INFINITY), json!("Infinity"));
        assert_eq!(f64_to_json(f64::NEG_INFINITY), json!("-Infinity"));
        assert_eq!(f64_to_json(-0.0).to_string(), "-0.0");
        for alias in ["nan", "inf", "-inf"] {
            assert!(f64_from_json(&json!(alias)).is_ok(), "{alias}");
        }
        assert!(f64_from_json(&json!("fast")).is_err());
        assert!(f64_from_json(&json!(true)).is_err());
        assert!(f64_from_json(&Value::Null).is_err());
    }

    #[test]
    fn every_kind_of_f32_survives_print_and_read() {
        for x in [
            0.1_f32,
            1.0 / 3.0,
            -0.0,
            f32::MIN_POSITIVE / 2.0,
            f32::from_bits(1),
            f32::MIN_POSITIVE,
            f32::MAX,
            f32::MIN,
            16777217.0,
            // its shortest decimal's nearest f64 is a midpoint: rounding twice picks the
            // neighbour 7.0385313e-26
            7.038531e-26,
            -7.038531e-26,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ] {
            let back = f32_through_text(x);
            assert_eq!(back.to_bits(), x.to_bits(), "{x:e} came back as {back:e}");
        }
        assert!(f32_through_text(f32::NAN).is_nan());
        assert_eq!(
            f32_to_json(0.1).to_string(),
            "0.1",
            "the shortest f32 decimal"
        );
        assert_eq!(f32_to_json(f32::MAX).to_string(), "3.4028235e+38");
    }

    #[test]
    fn a_finite_number_beyond_f32_is_refused_not_infinity() {
        let e = f32_from_json(&json!(1e39)).unwrap_err();
        assert!(
            matches!(e, NumberError::OutOfRange { ty: "f32", .. }),
            "{e}"
        );
        assert!(f32_from_json(&json!(-1e39)).is_err());
        assert!(f32_from_f64(f64::MAX).is_err());
        // just above f32::MAX but rounding to it is f32::MAX, not an error
        assert_eq!(f32_from_json(&json!(3.4028235e38)).unwrap(), f32::MAX);
        // the smallest value that rounds to infinity
        let edge = f64::from(f32::MAX) + 2f64.powi(103);
        assert!(f32_from_f64(edge).is_err());
        assert_eq!(f32_from_f64(edge - 2f64.powi(75)).unwrap(), f32::MAX);
        assert!(f32_from_json(&json!("Infinity")).unwrap().is_infinite());
    }

    #[test]
    fn integers_keep_their_full_range_and_refuse_one_past() {
        fn check<T>(ty: &'static str, min: T, max: T, below: Value, above: Value)
        where
            T: TryFrom<i128> + TryFrom<u128> + PartialEq + std::fmt::Debug + Copy,
            Value: From<T>,
        {
            assert_eq!(int_from_json::<T>(&Value::from(min), ty).unwrap(), min);
            assert_eq!(int_from_json::<T>(&Value::from(max), ty).unwrap(), max);
            for v in [below, above] {
                let e = int_from_json::<T>(&v, ty).unwrap_err();
                assert!(
                    matches!(&e, NumberError::OutOfRange { ty: t, .. } if *t == ty),
                    "{ty}: {v} gave {e}"
                );
            }
        }
        check::<u8>("u8", 0, u8::MAX, json!(-1), json!(256));
        check::<i8>("i8", i8::MIN, i8::MAX, json!(-129), json!(128));
        check::<u16>("u16", 0, u16::MAX, json!(-1), json!(65536));
        check::<i16>("i16", i16::MIN, i16::MAX, json!(-32769), json!(32768));
        check::<u32>("u32", 0, u32::MAX, json!(-1), json!(4294967296_u64));
        check::<i32>(
            "i32",
            i32::MIN,
            i32::MAX,
            json!(-2147483649_i64),
            json!(2147483648_u64),
        );
        check::<u64>("u64", 0, u64::MAX, json!(-1), json!("18446744073709551616"));
        check::<i64>(
            "i64",
            i64::MIN,
            i64::MAX,
            json!("-9223372036854775809"),
            json!(9223372036854775808_u64),
        );
        // past 2^53 exactly, from JSON text
        let v: Value = serde_json::from_str("18446744073709551615").unwrap();
        assert_eq!(int_from_json::<u64>(&v, "u64").unwrap(), u64::MAX);
        let v: Value = serde_json::from_str("9007199254740993").unwrap();
        assert_eq!(int_from_json::<i64>(&v, "i64").unwrap(), 9007199254740993);
        // 128-bit as decimal strings
        let max = u128::MAX.to_string();
        assert_eq!(
            int_from_json::<u128>(&json!(max), "u128").unwrap(),
            u128::MAX
        );
        let past = format!("{max}0");
        assert!(matches!(
            int_from_json::<u128>(&json!(past), "u128"),
            Err(NumberError::OutOfRange { .. })
        ));
        assert_eq!(
            int_from_json::<i128>(&json!(i128::MIN.to_string()), "i128").unwrap(),
            i128::MIN
        );
    }

    #[test]
    fn integers_refuse_fractions_booleans_and_words() {
        for v in [
            json!(1.5),
            json!(1.0),
            json!(true),
            json!("one"),
            json!(null),
        ] {
            let e = int_from_json::<i32>(&v, "i32").unwrap_err();
            assert!(matches!(e, NumberError::WrongKind { .. }), "{v}: {e}");
            assert!(e.to_string().contains("i32"), "{e}");
        }
    }

    #[test]
    fn booleans_are_true_and_false_only() {
        assert!(bool_from_json(&json!(true)).unwrap());
        assert!(!bool_from_json(&json!(false)).unwrap());
        for v in [json!(1), json!("true"), json!(null)] {
            assert!(bool_from_json(&v).is_err(), "{v}");
        }
    }
}
