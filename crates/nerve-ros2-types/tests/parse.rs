//! Parser and name edge cases.

use nerve_ros2_types::parse::{parse_action, parse_msg, parse_srv};
use nerve_ros2_types::{
    decode, encode, Array, BaseType, Container, ParseErrorKind, Registry, RegistryError, TypeName,
    Value,
};

fn tn(s: &str) -> TypeName {
    TypeName::parse(s).unwrap()
}

#[test]
fn constants_and_defaults() {
    let d = parse_msg(
        &tn("p/msg/M"),
        "uint8 A=0x10\nint64 B = -5\nstring S=\"quoted 'x'\"\nstring T= plain text \nbool F=False\n\
         float64 E=2.5\nwstring W='w'\nstring<=5 s 'abc'\nint32[] q [1, -2, 3]\nbool[2] b [true, 0]\n",
    )
    .unwrap();
    let c: Vec<(&str, &Value)> = d
        .constants
        .iter()
        .map(|c| (c.name.as_str(), &c.value))
        .collect();
    assert_eq!(c[0], ("A", &Value::UInt8(16)));
    assert_eq!(c[1], ("B", &Value::Int64(-5)));
    assert_eq!(c[2], ("S", &Value::String("quoted 'x'".into())));
    assert_eq!(c[3], ("T", &Value::String("plain text".into())));
    assert_eq!(c[4], ("F", &Value::Bool(false)));
    assert_eq!(c[5], ("E", &Value::Float64(2.5)));
    assert_eq!(c[6], ("W", &Value::WString("w".into())));
    assert_eq!(d.fields[0].ty.base, BaseType::String { bound: Some(5) });
    assert_eq!(
        d.fields[1].default,
        Some(Value::Array(Array::Int32(vec![1, -2, 3])))
    );
    assert_eq!(d.fields[2].ty.container, Container::Array(2));
    assert_eq!(
        d.fields[2].default,
        Some(Value::Array(Array::Bool(vec![true, false])))
    );
}

#[test]
fn bad_definitions() {
    type Check = fn(&ParseErrorKind) -> bool;
    let cases: &[(&str, Check)] = &[
        ("string<=3 s 'toolong'", |k| {
            matches!(k, ParseErrorKind::InvalidValue { .. })
        }),
        ("int32[2] a [1]", |k| {
            matches!(k, ParseErrorKind::InvalidValue { .. })
        }),
        ("int32[<=1] a [1, 2]", |k| {
            matches!(k, ParseErrorKind::InvalidValue { .. })
        }),
        ("uint8 X=256", |k| {
            matches!(k, ParseErrorKind::InvalidValue { .. })
        }),
        ("int32[] X=1", |k| {
            matches!(k, ParseErrorKind::ConstantNotPrimitive(_))
        }),
        ("p/Other X=1", |k| {
            matches!(k, ParseErrorKind::ConstantNotPrimitive(_))
        }),
        ("Other o 5", |k| {
            matches!(k, ParseErrorKind::DefaultOnNested(_))
        }),
        ("int32 9bad", |k| {
            matches!(k, ParseErrorKind::InvalidFieldName(_))
        }),
        ("floot32 x", |k| matches!(k, ParseErrorKind::InvalidType(_))),
        ("int32[99999999999] x", |k| {
            matches!(k, ParseErrorKind::InvalidBound(_))
        }),
        ("string<=0 x", |k| {
            matches!(k, ParseErrorKind::InvalidBound(_))
        }),
        ("int32[ x", |k| matches!(k, ParseErrorKind::InvalidType(_))),
        ("bool b maybe", |k| {
            matches!(k, ParseErrorKind::InvalidValue { .. })
        }),
        ("float32 f abc", |k| {
            matches!(k, ParseErrorKind::InvalidValue { .. })
        }),
        ("string s \"unterminated", |k| {
            !matches!(k, ParseErrorKind::MissingName)
        }),
    ];
    for (text, check) in cases {
        match parse_msg(&tn("p/msg/M"), &format!("# header\n{text}\n")) {
            Ok(d) if *text == "string s \"unterminated" => assert_eq!(d.fields.len(), 1),
            Ok(d) => panic!("`{text}` parsed: {d:?}"),
            Err(e) => {
                assert!(check(&e.kind), "`{text}`: {e}");
                assert_eq!(e.line, 2, "`{text}`: {e}");
                assert!(e.to_string().starts_with("p/msg/M:2: "), "{e}");
            }
        }
    }
}

#[test]
fn srv_and_action_structure() {
    let defs = parse_srv(&tn("p/srv/S"), "int32 a\n---\n").unwrap();
    let names: Vec<String> = defs.iter().map(|d| d.name.to_string()).collect();
    assert_eq!(
        names,
        [
            "p/srv/S",
            "p/srv/S_Request",
            "p/srv/S_Response",
            "p/srv/S_Event"
        ]
    );
    assert!(defs[2].is_empty_placeholder());
    let defs = parse_action(&tn("p/action/A"), "int32 g\n---\nint32 r\n---\nint32 f\n").unwrap();
    assert_eq!(defs.len(), 13);
    let e = parse_action(&tn("p/action/A"), "int32 g\n---\nint32 r\n").unwrap_err();
    assert!(matches!(*e.kind, ParseErrorKind::ActionSeparator(1)), "{e}");
}

#[test]
fn recursive_schema_is_rejected() {
    let schema = "int32 x\np/B b\n================================================================================\nMSG: p/B\np/A a\n";
    let e = Registry::from_ros2msg("p/msg/A", schema).unwrap_err();
    assert!(matches!(e, RegistryError::TooDeep { .. }), "{e}");
    // Decoding a recursive type inserted without checks stops at the depth limit.
    let mut reg = Registry::new();
    reg.add_interface_text("p/msg/T", "p/T[] children\n")
        .unwrap();
    let mut bytes = vec![0, 1, 0, 0];
    for _ in 0..100 {
        bytes.extend_from_slice(&1u32.to_le_bytes());
    }
    let e = decode(&reg, "p/msg/T", &bytes).unwrap_err();
    assert!(e.to_string().contains("levels deep"), "{e}");
}

#[test]
fn schema_errors() {
    let e = Registry::from_ros2msg("p/msg/A", "p/Missing m\n").unwrap_err();
    assert!(e.to_string().contains("p/msg/Missing"), "{e}");
    let e = Registry::from_ros2msg("p/msg/A", "int32 x\n=====\nIDL: p/msg/B\nmodule p {};\n")
        .unwrap_err();
    assert!(e.to_string().contains("IDL"), "{e}");
    let e = Registry::from_ros2msg(
        "p/msg/A",
        "int32 x\n=====\nMSG: p/B\nint32 y\nbogus line here\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains(":5:"), "{e}");
}

#[test]
fn order_preserving_json_text() {
    let mut reg = Registry::new();
    reg.add_interface_text("p/msg/M", "int32 zeta\nfloat32 alpha\nuint8[] data\n")
        .unwrap();
    let v = Value::default_for(&reg, "p/msg/M").unwrap();
    assert_eq!(
        serde_json::to_string(&v).unwrap(),
        r#"{"zeta":0,"alpha":0.0,"data":[]}"#
    );
    let mut out = Vec::new();
    encode(&reg, "p/M", &v, &mut out).unwrap();
    assert_eq!(out, [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
}
