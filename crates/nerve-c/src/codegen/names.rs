//! Mapping Nerve names to C++ (and C): namespaces, identifiers and header paths.

use super::{CodegenError, Lang};
use std::path::PathBuf;

/// Where a type goes in C++: its namespace, its name there and its header.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct CppName {
    /// Namespace segments (`["nerve", "msgs"]`).
    pub ns: Vec<String>,
    /// The type's name in its namespace.
    pub name: String,
}

impl CppName {
    /// The namespace as C++ writes it (`nerve::msgs`).
    pub fn namespace(&self) -> String {
        self.ns.join("::")
    }

    /// The fully qualified name (`::nerve::msgs::Imu`).
    pub fn qualified(&self) -> String {
        format!("::{}::{}", self.namespace(), self.name)
    }

    /// The relative path of its header in `lang` (`nerve/msgs/imu.hpp`,
    /// `nerve/msgs/imu.h`).
    pub fn path(&self, lang: Lang) -> PathBuf {
        let mut p: PathBuf = self.ns.iter().collect();
        p.push(format!("{}.{}", snake_case(&self.name), lang.extension()));
        p
    }

    /// Its name in C: the namespace's segments and the name joined by `_`
    /// (`nerve_msgs_Imu`).
    pub fn c_name(&self) -> String {
        format!("{}_{}", self.ns.join("_"), self.name)
    }

    /// Its name as `lang` writes it (`::nerve::msgs::Imu`, `nerve_msgs_Imu`).
    pub fn in_lang(&self, lang: Lang) -> String {
        match lang {
            Lang::Cpp => self.qualified(),
            Lang::C => self.c_name(),
        }
    }

    /// The prefix of its C macros: the C name in upper snake case
    /// (`NERVE_MSGS_POINT_CLOUD`).
    pub fn macro_prefix(&self) -> String {
        snake_case(&self.c_name()).to_ascii_uppercase()
    }

    /// The same namespace with another type name in it.
    pub fn sibling(&self, name: &str) -> CppName {
        CppName {
            ns: self.ns.clone(),
            name: name.to_string(),
        }
    }
}

/// Where a struct nested in a message of `owner` goes: Nerve's own (`nerve::msgs::Time`,
/// in its installed header) when it is a struct of the built-in types by name and layout,
/// else a sibling of the message in its namespace (`my_pkg::Pose2D`). So a `Time` (or a
/// `Header`, `Vector3`) in a user's message is the library's type, not a copy in the
/// user's namespace that C++ would take for another type.
pub(crate) fn nested_name(owner: &CppName, shape: &nerve::message::schema::StructShape) -> CppName {
    use std::sync::OnceLock;
    static BUILTIN: OnceLock<Vec<nerve::message::schema::StructShape>> = OnceLock::new();
    let builtin = BUILTIN.get_or_init(|| {
        let mut out = Vec::new();
        for schema in nerve_msgs::schemas() {
            let mut nested = Vec::new();
            if let nerve::message::schema::Shape::Struct(head) = &schema.head {
                for f in &head.fields {
                    super::collect_structs(&f.shape, &mut nested);
                }
            }
            if let Some(elem) = &schema.elem {
                super::collect_structs(elem, &mut nested);
            }
            for s in nested {
                if !out.contains(s) {
                    out.push(s.clone());
                }
            }
        }
        out
    });
    if builtin.contains(shape) {
        CppName {
            ns: vec!["nerve".into(), "msgs".into()],
            name: shape.name.clone(),
        }
    } else {
        owner.sibling(&shape.name)
    }
}

/// Maps a Nerve type name (`pkg/Name`, or `pkg/sub/Name` as ROS 2 names are) to C++:
/// `nerve_msgs` becomes namespace `nerve::msgs`, any other package keeps its name
/// (`my_pkg/Pose2D` → `my_pkg::Pose2D`, `std_msgs/msg/String` → `std_msgs::msg::String`).
/// Every segment must be a C++ identifier; the namespaces `nerve` (the library's own) and
/// `std` are refused. In C, where the C name starts with the first segment, that segment
/// may not start with `_` (reserved at file scope).
pub(crate) fn cpp_name(type_name: &str, lang: Lang) -> Result<CppName, CodegenError> {
    let bad = |reason: String| CodegenError::BadName {
        name: type_name.to_string(),
        context: "type name".to_string(),
        reason,
        lang,
    };
    let mut segments: Vec<&str> = type_name.split('/').collect();
    let name = segments.pop().unwrap_or_default();
    if segments.is_empty() {
        return Err(bad("expected pkg/Name".into()));
    }
    let mut ns = Vec::with_capacity(segments.len() + 1);
    for (i, seg) in segments.iter().enumerate() {
        if i == 0 && *seg == "nerve_msgs" {
            ns.extend(["nerve".to_string(), "msgs".to_string()]);
            continue;
        }
        check_identifier(seg).map_err(|r| bad(format!("package segment {seg:?}: {r}")))?;
        if RESERVED_NAMESPACES.contains(seg) {
            return Err(bad(format!("namespace {seg:?} is reserved")));
        }
        if i == 0 && lang == Lang::C && seg.starts_with('_') {
            return Err(bad(format!(
                "package segment {seg:?}: a C name starting with `_` is reserved"
            )));
        }
        ns.push(seg.to_string());
    }
    check_type_identifier(name).map_err(|r| bad(format!("{name:?}: {r}")))?;
    Ok(CppName {
        ns,
        name: name.to_string(),
    })
}

/// Names no generated namespace may have: the library's and the standard library's.
const RESERVED_NAMESPACES: [&str; 2] = ["nerve", "std"];

/// Checks a name that becomes a C++ type (a message, a struct, a service or an action).
pub(crate) fn check_type_identifier(name: &str) -> Result<(), String> {
    check_identifier(name)?;
    if RESERVED_NAMESPACES.contains(&name) {
        return Err("the name of a namespace generated code refers to".into());
    }
    Ok(())
}

/// The C++ name of a struct field: the Rust name, or `_0`, `_1`, … for the fields of a
/// tuple struct (whose Rust names are digits).
pub(crate) fn field_name(name: &str) -> Result<String, String> {
    let cpp = if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
        format!("_{name}")
    } else {
        name.to_string()
    };
    check_identifier(&cpp)?;
    Ok(cpp)
}

/// A C++ identifier that is neither a keyword nor reserved to the implementation, and no
/// common macro of the C library.
pub(crate) fn check_identifier(s: &str) -> Result<(), String> {
    let mut bytes = s.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
    if !first_ok || !bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err("not a C++ identifier".into());
    }
    if s.contains("__")
        || (s.starts_with('_') && s[1..].starts_with(|c: char| c.is_ascii_uppercase()))
    {
        return Err("reserved to the C++ implementation (`__` or `_` and a capital)".into());
    }
    if CPP_KEYWORDS.binary_search(&s).is_ok() {
        return Err("a C++ keyword".into());
    }
    if C_MACROS.contains(&s) {
        return Err("a macro of the C library or the compiler".into());
    }
    Ok(())
}

/// The C name of a struct field: its C++ name ([`field_name`]), and no keyword of C
/// (C23's included) either.
pub(crate) fn c_field_name(name: &str) -> Result<String, String> {
    let c = field_name(name)?;
    if C_KEYWORDS.contains(&c.as_str()) {
        return Err("a C keyword".into());
    }
    Ok(c)
}

/// The keywords of C (to C23) that are not C++ keywords too, nor reserved names (`_Bool`,
/// `_Alignas`, … start with `_` and a capital), and `fortran`, a common extension.
const C_KEYWORDS: &[&str] = &["fortran", "restrict", "typeof", "typeof_unqual"];

/// C++20 keywords and alternative tokens, sorted (for binary search).
const CPP_KEYWORDS: &[&str] = &[
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "atomic_cancel",
    "atomic_commit",
    "atomic_noexcept",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char16_t",
    "char32_t",
    "char8_t",
    "class",
    "co_await",
    "co_return",
    "co_yield",
    "compl",
    "concept",
    "const",
    "const_cast",
    "consteval",
    "constexpr",
    "constinit",
    "continue",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "final",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "import",
    "inline",
    "int",
    "long",
    "module",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "override",
    "private",
    "protected",
    "public",
    "reflexpr",
    "register",
    "reinterpret_cast",
    "requires",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "synchronized",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
];

/// Object-like macros of the C library and of compilers in GNU modes that would replace a
/// field or type of that name.
const C_MACROS: &[&str] = &[
    "NULL", "EOF", "errno", "stdin", "stdout", "stderr", "unix", "linux", "offsetof", "assert",
];

/// `CamelCase` to `snake_case`, as ROS 2's rosidl names its headers: an underscore goes
/// before a capital that follows a lower-case letter or a digit, and before a capital
/// that starts a word after an acronym (followed by a lower-case letter); never next to
/// an underscore. `Imu` → `imu`, `PointCloud` → `point_cloud`, `Vector3` → `vector3`,
/// `Pose2D` → `pose2_d`, `HTTPServer` → `http_server`.
pub fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            let after_word = prev.is_ascii_lowercase() || prev.is_ascii_digit();
            let ends_acronym = prev.is_ascii_uppercase() && next_lower;
            if prev != '_' && (after_word || ends_acronym) {
                out.push('_');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_are_sorted() {
        let mut sorted = CPP_KEYWORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, CPP_KEYWORDS);
    }

    #[test]
    fn snake_case_follows_rosidl() {
        for (camel, snake) in [
            ("Imu", "imu"),
            ("PointCloud", "point_cloud"),
            ("Vector3", "vector3"),
            ("Pose2D", "pose2_d"),
            ("HTTPServer", "http_server"),
            ("AddTwoInts", "add_two_ints"),
            ("My_Type", "my_type"),
            ("already_snake", "already_snake"),
            ("A", "a"),
        ] {
            assert_eq!(snake_case(camel), snake, "{camel}");
        }
    }

    #[test]
    fn type_names_map_to_namespaces_and_paths() {
        let n = cpp_name("nerve_msgs/Imu", Lang::Cpp).unwrap();
        assert_eq!(n.qualified(), "::nerve::msgs::Imu");
        assert_eq!(n.path(Lang::Cpp), PathBuf::from("nerve/msgs/imu.hpp"));
        assert_eq!(n.path(Lang::C), PathBuf::from("nerve/msgs/imu.h"));
        assert_eq!(n.c_name(), "nerve_msgs_Imu");
        assert_eq!(n.macro_prefix(), "NERVE_MSGS_IMU");
        let n = cpp_name("std_msgs/msg/String", Lang::Cpp).unwrap();
        assert_eq!(n.qualified(), "::std_msgs::msg::String");
        assert_eq!(n.path(Lang::Cpp), PathBuf::from("std_msgs/msg/string.hpp"));
        assert_eq!(n.c_name(), "std_msgs_msg_String");
        assert_eq!(n.macro_prefix(), "STD_MSGS_MSG_STRING");
        let n = cpp_name("nerve_msgs/PointCloud", Lang::C).unwrap();
        assert_eq!(n.macro_prefix(), "NERVE_MSGS_POINT_CLOUD");
        assert_eq!(
            cpp_name("my_pkg/Pose2D", Lang::C).unwrap().macro_prefix(),
            "MY_PKG_POSE2_D"
        );
        assert!(cpp_name("_pkg/X", Lang::Cpp).is_ok());
        assert!(matches!(
            cpp_name("_pkg/X", Lang::C),
            Err(CodegenError::BadName { lang: Lang::C, .. })
        ));
        for bad in [
            "Imu",
            "/Imu",
            "pkg/",
            "nerve/Imu",
            "std/Vector",
            "my-pkg/X",
            "pkg/class",
            "pkg/2D",
            "pkg/__X",
        ] {
            assert!(
                matches!(cpp_name(bad, Lang::Cpp), Err(CodegenError::BadName { .. })),
                "{bad}"
            );
        }
        assert_eq!(field_name("0").unwrap(), "_0");
        assert!(field_name("new").is_err());
        assert!(field_name("_Upper").is_err());
        assert!(field_name("while").is_err());
        assert_eq!(c_field_name("0").unwrap(), "_0");
        assert!(c_field_name("restrict").is_err());
        assert!(c_field_name("class").is_err(), "C++ keywords too");
        assert!(field_name("restrict").is_ok(), "not in C++");
    }
}
