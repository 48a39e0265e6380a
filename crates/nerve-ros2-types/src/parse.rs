//! Parser for `.msg`, `.srv` and `.action` interface text, following `rosidl_adapter`.
//!
//! Services and actions expand into the messages rosidl generates for them (see
//! [`parse_srv`] and [`parse_action`]).

use std::collections::HashSet;
use std::sync::Arc;

use crate::definition::{
    BaseType, Constant, Container, DefinitionRole, Field, FieldType, MessageDefinition,
    PrimitiveType, EMPTY_PLACEHOLDER_FIELD,
};
use crate::name::{is_valid_package, is_valid_type, InterfaceKind, SubType, TypeName};
use crate::value::{Array, Value};

/// Largest fixed array size / sequence bound / string bound accepted in a definition.
pub const MAX_DECLARED_SIZE: u32 = 1 << 24;

/// A syntax or semantic error in interface text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{origin}:{line}: {kind}{}", if text.is_empty() { String::new() } else { format!(" (in `{text}`)") })]
pub struct ParseError {
    /// The type (or file) being parsed.
    pub origin: String,
    /// 1-based line number in the parsed text (0 when the error concerns the whole text).
    pub line: usize,
    /// The offending line, trimmed.
    pub text: String,
    /// What is wrong (boxed to keep `Result`s small).
    pub kind: Box<ParseErrorKind>,
}

/// The reason a definition could not be parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseErrorKind {
    /// A line has a type but no field/constant name.
    #[error("expected `TYPE NAME [DEFAULT]` or `TYPE NAME=VALUE`")]
    MissingName,
    /// The type of a field or constant could not be understood.
    #[error("invalid type `{0}`")]
    InvalidType(String),
    /// An array size or string bound is not an integer in 1..=16777216.
    #[error("invalid size or bound in `{0}` (must be an integer between 1 and 16777216)")]
    InvalidBound(String),
    /// A field name is not `[A-Za-z][A-Za-z0-9_]*`.
    #[error("invalid field name `{0}`")]
    InvalidFieldName(String),
    /// A constant name is not `[A-Za-z][A-Za-z0-9_]*`.
    #[error("invalid constant name `{0}`")]
    InvalidConstantName(String),
    /// A constant has an array or nested type.
    #[error("constant `{0}` must have a primitive or string type")]
    ConstantNotPrimitive(String),
    /// A default value on a nested-message field.
    #[error("field `{0}` of a message type cannot have a default value")]
    DefaultOnNested(String),
    /// A constant or default value does not fit its type.
    #[error("value `{value}` is not a valid {ty}: {reason}")]
    InvalidValue {
        /// The type spelled as in the definition.
        ty: String,
        /// The value text.
        value: String,
        /// Why it was rejected.
        reason: String,
    },
    /// Two fields with the same name.
    #[error("duplicate field `{0}`")]
    DuplicateField(String),
    /// Two constants with the same name.
    #[error("duplicate constant `{0}`")]
    DuplicateConstant(String),
    /// A .srv without exactly one `---` line.
    #[error("a service definition needs exactly one `---` line separating request and response, found {0}")]
    ServiceSeparator(usize),
    /// A .action without exactly two `---` lines.
    #[error(
        "an action definition needs exactly two `---` lines (goal, result, feedback), found {0}"
    )]
    ActionSeparator(usize),
}

struct Ctx<'a> {
    origin: String,
    package: &'a str,
    line_offset: usize,
}

impl Ctx<'_> {
    fn err(&self, line: usize, text: &str, kind: ParseErrorKind) -> ParseError {
        ParseError {
            origin: self.origin.clone(),
            line: line + self.line_offset,
            text: text.trim().to_string(),
            kind: Box::new(kind),
        }
    }
}

/// Parses the text of a `.msg` file (or one section of a .srv/.action) into a message
/// definition named `name`. Short nested type names resolve to `name`'s package.
pub fn parse_msg(name: &TypeName, text: &str) -> Result<MessageDefinition, ParseError> {
    let ctx = Ctx {
        origin: name.to_string(),
        package: name.package(),
        line_offset: 0,
    };
    let mut def = parse_body(&ctx, name.clone(), text)?;
    def.source = Some(Arc::from(text));
    Ok(def)
}

fn parse_body(ctx: &Ctx<'_>, name: TypeName, text: &str) -> Result<MessageDefinition, ParseError> {
    let mut fields: Vec<Field> = Vec::new();
    let mut constants: Vec<Constant> = Vec::new();
    let mut field_names = HashSet::new();
    let mut const_names = HashSet::new();
    for (idx, raw) in text.lines().enumerate() {
        let lineno = idx + 1;
        let line = raw.replace('\t', " ");
        let line = match line.find('#') {
            Some(i) => &line[..i],
            None => &line[..],
        };
        let line = line.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        let line = line.trim_start();
        let (type_str, rest) = match line.split_once(' ') {
            Some((t, r)) => (t, r.trim_start()),
            None => (line, ""),
        };
        if rest.is_empty() {
            return Err(ctx.err(lineno, raw, ParseErrorKind::MissingName));
        }
        if let Some(eq) = rest.find('=') {
            // constant
            let cname = rest[..eq].trim_end();
            let value_str = rest[eq + 1..].trim_start();
            if !is_valid_type(cname) {
                return Err(ctx.err(
                    lineno,
                    raw,
                    ParseErrorKind::InvalidConstantName(cname.to_string()),
                ));
            }
            let ty =
                parse_field_type(type_str, ctx.package).map_err(|k| ctx.err(lineno, raw, k))?;
            if ty.container != Container::Single || matches!(ty.base, BaseType::Nested(_)) {
                return Err(ctx.err(
                    lineno,
                    raw,
                    ParseErrorKind::ConstantNotPrimitive(cname.to_string()),
                ));
            }
            let value = parse_value(&ty, value_str).map_err(|k| ctx.err(lineno, raw, k))?;
            if !const_names.insert(cname.to_string()) {
                return Err(ctx.err(
                    lineno,
                    raw,
                    ParseErrorKind::DuplicateConstant(cname.to_string()),
                ));
            }
            constants.push(Constant {
                name: cname.to_string(),
                ty: ty.base,
                value,
            });
        } else {
            let (fname, default_str) = match rest.split_once(' ') {
                Some((n, d)) => (n, d.trim_start()),
                None => (rest, ""),
            };
            if !is_valid_type(fname) {
                return Err(ctx.err(
                    lineno,
                    raw,
                    ParseErrorKind::InvalidFieldName(fname.to_string()),
                ));
            }
            let ty =
                parse_field_type(type_str, ctx.package).map_err(|k| ctx.err(lineno, raw, k))?;
            let default = if default_str.is_empty() {
                None
            } else {
                if matches!(ty.base, BaseType::Nested(_)) {
                    return Err(ctx.err(
                        lineno,
                        raw,
                        ParseErrorKind::DefaultOnNested(fname.to_string()),
                    ));
                }
                Some(parse_value(&ty, default_str).map_err(|k| ctx.err(lineno, raw, k))?)
            };
            if !field_names.insert(fname.to_string()) {
                return Err(ctx.err(
                    lineno,
                    raw,
                    ParseErrorKind::DuplicateField(fname.to_string()),
                ));
            }
            fields.push(Field {
                name: Arc::from(fname),
                ty,
                default,
            });
        }
    }
    if fields.is_empty() {
        fields.push(Field {
            name: Arc::from(EMPTY_PLACEHOLDER_FIELD),
            ty: FieldType::single(BaseType::Primitive(PrimitiveType::UInt8)),
            default: None,
        });
    }
    Ok(MessageDefinition {
        name,
        fields,
        constants,
        role: DefinitionRole::Message,
        source: None,
    })
}

fn parse_size(s: &str, whole: &str) -> Result<u32, ParseErrorKind> {
    match s.trim().parse::<u32>() {
        Ok(n) if n > 0 && n <= MAX_DECLARED_SIZE => Ok(n),
        _ => Err(ParseErrorKind::InvalidBound(whole.to_string())),
    }
}

/// Parses a .msg field type such as `uint8[<=4]`, `string<=10[]`, `geometry_msgs/Point[3]` or
/// `Header`. Short nested names resolve to `package`; `Header` means `std_msgs/msg/Header`.
pub fn parse_field_type(s: &str, package: &str) -> Result<FieldType, ParseErrorKind> {
    let (base_str, container) = if let Some(stripped) = s.strip_suffix(']') {
        let open = stripped
            .rfind('[')
            .ok_or_else(|| ParseErrorKind::InvalidType(s.to_string()))?;
        let inner = &stripped[open + 1..];
        let container = if inner.is_empty() {
            Container::Sequence
        } else if let Some(b) = inner.strip_prefix("<=") {
            Container::BoundedSequence(parse_size(b, s)?)
        } else {
            Container::Array(parse_size(inner, s)?)
        };
        (&stripped[..open], container)
    } else {
        (s, Container::Single)
    };
    let base = parse_base_type(base_str, package)
        .ok_or_else(|| ParseErrorKind::InvalidType(s.to_string()))??;
    Ok(FieldType { base, container })
}

fn parse_base_type(s: &str, package: &str) -> Option<Result<BaseType, ParseErrorKind>> {
    if let Some(p) = PrimitiveType::from_msg_name(s) {
        return Some(Ok(BaseType::Primitive(p)));
    }
    match s {
        "string" => return Some(Ok(BaseType::String { bound: None })),
        "wstring" => return Some(Ok(BaseType::WString { bound: None })),
        "Header" => return Some(Ok(BaseType::Nested(well_known("std_msgs", "Header")))),
        "time" => {
            return Some(Ok(BaseType::Nested(well_known(
                "builtin_interfaces",
                "Time",
            ))))
        }
        "duration" => {
            return Some(Ok(BaseType::Nested(well_known(
                "builtin_interfaces",
                "Duration",
            ))))
        }
        _ => {}
    }
    if let Some(b) = s.strip_prefix("string<=") {
        return Some(parse_size(b, s).map(|n| BaseType::String { bound: Some(n) }));
    }
    if let Some(b) = s.strip_prefix("wstring<=") {
        return Some(parse_size(b, s).map(|n| BaseType::WString { bound: Some(n) }));
    }
    if s.contains('/') {
        return TypeName::parse(s).ok().map(|t| Ok(BaseType::Nested(t)));
    }
    // A bare lowercase word is a misspelt primitive, not a message name.
    if is_valid_package(package)
        && is_valid_type(s)
        && s.starts_with(|c: char| c.is_ascii_uppercase())
    {
        return TypeName::new(package, InterfaceKind::Msg, s)
            .ok()
            .map(|t| Ok(BaseType::Nested(t)));
    }
    None
}

fn invalid(ty: &FieldType, value: &str, reason: impl Into<String>) -> ParseErrorKind {
    ParseErrorKind::InvalidValue {
        ty: ty.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Parses an integer like Python's `int(s)` falling back to `int(s, 0)` (so `0x1F`, `0o7`,
/// `0b1` work).
fn parse_int(s: &str) -> Option<i128> {
    let t = s.trim().replace('_', "");
    if let Ok(v) = t.parse::<i128>() {
        return Some(v);
    }
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(&t)),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else {
        return None;
    };
    let v = i128::from_str_radix(digits, radix).ok()?;
    Some(if neg { -v } else { v })
}

fn parse_float(s: &str) -> Option<f64> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    match lower.trim_start_matches(['+', '-']) {
        "inf" | "infinity" | "nan" => {}
        _ if lower.contains("inf") || lower.contains("nan") => return None,
        _ => {}
    }
    t.parse::<f64>().ok()
}

fn parse_primitive(ty: &FieldType, p: PrimitiveType, s: &str) -> Result<Value, ParseErrorKind> {
    use PrimitiveType as P;
    if p == P::Bool {
        return match s.trim().to_ascii_lowercase().as_str() {
            "true" | "1" => Ok(Value::Bool(true)),
            "false" | "0" => Ok(Value::Bool(false)),
            _ => Err(invalid(ty, s, "must be true/1 or false/0")),
        };
    }
    if matches!(p, P::Float32 | P::Float64) {
        let v = parse_float(s).ok_or_else(|| invalid(ty, s, "not a floating point number"))?;
        return Ok(if p == P::Float32 {
            Value::Float32(v as f32)
        } else {
            Value::Float64(v)
        });
    }
    let v = parse_int(s).ok_or_else(|| invalid(ty, s, "not an integer"))?;
    let out_of_range = || invalid(ty, s, format!("out of range for {}", p.msg_name()));
    Ok(match p {
        P::Byte | P::Char | P::UInt8 => Value::UInt8(u8::try_from(v).map_err(|_| out_of_range())?),
        P::Int8 => Value::Int8(i8::try_from(v).map_err(|_| out_of_range())?),
        P::Int16 => Value::Int16(i16::try_from(v).map_err(|_| out_of_range())?),
        P::UInt16 => Value::UInt16(u16::try_from(v).map_err(|_| out_of_range())?),
        P::Int32 => Value::Int32(i32::try_from(v).map_err(|_| out_of_range())?),
        P::UInt32 => Value::UInt32(u32::try_from(v).map_err(|_| out_of_range())?),
        P::Int64 => Value::Int64(i64::try_from(v).map_err(|_| out_of_range())?),
        P::UInt64 => Value::UInt64(u64::try_from(v).map_err(|_| out_of_range())?),
        P::Bool | P::Float32 | P::Float64 => return Err(invalid(ty, s, "not an integer type")),
    })
}

/// Strips matching outer quotes and unescapes `\"`/`\'` like rosidl does.
fn parse_string_literal(
    ty: &FieldType,
    s: &str,
    bound: Option<u32>,
) -> Result<String, ParseErrorKind> {
    let mut out = s.to_string();
    for q in ['"', '\''] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            let inner = &s[1..s.len() - 1];
            let bytes: Vec<char> = inner.chars().collect();
            for (i, c) in bytes.iter().enumerate() {
                if *c == q && (i == 0 || bytes[i - 1] != '\\') {
                    return Err(invalid(ty, s, "string inner quotes not properly escaped"));
                }
            }
            out = inner.replace(&format!("\\{q}"), &q.to_string());
            break;
        }
    }
    if let Some(b) = bound {
        if out.chars().count() > b as usize {
            return Err(invalid(
                ty,
                s,
                format!("string longer than its bound of {b}"),
            ));
        }
    }
    Ok(out)
}

/// Splits the inside of a string array literal into elements, honouring quotes.
fn split_string_array(ty: &FieldType, s: &str) -> Result<Vec<String>, ParseErrorKind> {
    let mut out = Vec::new();
    let mut rest = s.trim_start_matches(' ');
    while !rest.is_empty() {
        if rest.starts_with(',') {
            return Err(invalid(ty, s, "unexpected `,`"));
        }
        let q = rest.chars().next().filter(|c| *c == '"' || *c == '\'');
        if let Some(q) = q {
            // find closing unescaped quote
            let chars: Vec<(usize, char)> = rest.char_indices().collect();
            let mut end = None;
            for k in 1..chars.len() {
                if chars[k].1 == q && chars[k - 1].1 != '\\' {
                    end = Some(chars[k].0);
                    break;
                }
            }
            let end = end.ok_or_else(|| invalid(ty, s, "string incorrectly quoted"))?;
            out.push(rest[..=end].to_string());
            rest = &rest[end + 1..];
        } else {
            match rest.find(',') {
                Some(i) => {
                    out.push(rest[..i].to_string());
                    rest = &rest[i..];
                }
                None => {
                    out.push(rest.to_string());
                    rest = "";
                }
            }
        }
        rest = rest.trim_start_matches(' ');
        if let Some(r) = rest.strip_prefix(',') {
            rest = r.trim_start_matches(' ');
        }
    }
    Ok(out)
}

/// Parses a default or constant value for a (non-nested) field type.
pub(crate) fn parse_value(ty: &FieldType, s: &str) -> Result<Value, ParseErrorKind> {
    let single = |text: &str| -> Result<Value, ParseErrorKind> {
        match &ty.base {
            BaseType::Primitive(p) => parse_primitive(ty, *p, text),
            BaseType::String { bound } => {
                Ok(Value::String(parse_string_literal(ty, text, *bound)?))
            }
            BaseType::WString { bound } => {
                Ok(Value::WString(parse_string_literal(ty, text, *bound)?))
            }
            BaseType::Nested(_) => Err(invalid(ty, text, "nested types have no literals")),
        }
    };
    if ty.container == Container::Single {
        return single(s);
    }
    let t = s.trim();
    let inner = t
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .ok_or_else(|| invalid(ty, s, "array value must start with `[` and end with `]`"))?;
    let elems: Vec<String> = match ty.base {
        BaseType::String { .. } | BaseType::WString { .. } => split_string_array(ty, inner)?,
        _ if inner.trim().is_empty() => Vec::new(),
        _ => inner.split(',').map(|e| e.to_string()).collect(),
    };
    match ty.container {
        Container::Array(n) if elems.len() != n as usize => {
            return Err(invalid(
                ty,
                s,
                format!("array must have exactly {n} elements, not {}", elems.len()),
            ))
        }
        Container::BoundedSequence(n) if elems.len() > n as usize => {
            return Err(invalid(
                ty,
                s,
                format!(
                    "sequence must have at most {n} elements, not {}",
                    elems.len()
                ),
            ))
        }
        _ => {}
    }
    let values = elems
        .iter()
        .map(|e| single(e.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Value::Array(values_to_array(&ty.base, values)))
}

/// Packs single values (already of the right kind) into a typed array for `base`.
pub(crate) fn values_to_array(base: &BaseType, values: Vec<Value>) -> Array {
    macro_rules! collect {
        ($variant:ident) => {
            Array::$variant(
                values
                    .into_iter()
                    .filter_map(|v| {
                        if let Value::$variant(x) = v {
                            Some(x)
                        } else {
                            None
                        }
                    })
                    .collect(),
            )
        };
    }
    match base {
        BaseType::Primitive(p) => match p {
            PrimitiveType::Bool => collect!(Bool),
            PrimitiveType::Byte | PrimitiveType::Char | PrimitiveType::UInt8 => collect!(UInt8),
            PrimitiveType::Int8 => collect!(Int8),
            PrimitiveType::Int16 => collect!(Int16),
            PrimitiveType::UInt16 => collect!(UInt16),
            PrimitiveType::Int32 => collect!(Int32),
            PrimitiveType::UInt32 => collect!(UInt32),
            PrimitiveType::Int64 => collect!(Int64),
            PrimitiveType::UInt64 => collect!(UInt64),
            PrimitiveType::Float32 => collect!(Float32),
            PrimitiveType::Float64 => collect!(Float64),
        },
        BaseType::String { .. } => collect!(String),
        BaseType::WString { .. } => collect!(WString),
        BaseType::Nested(_) => collect!(Struct),
    }
}

fn split_sections(text: &str) -> Vec<(usize, String)> {
    // (line offset of the section, section text)
    let mut sections = vec![(0usize, String::new())];
    for (i, line) in text.lines().enumerate() {
        if line.trim_end() == "---" {
            sections.push((i + 1, String::new()));
        } else {
            if let Some((_, cur)) = sections.last_mut() {
                cur.push_str(line);
                cur.push('\n');
            }
        }
    }
    sections
}

fn section(
    ctx_origin: &str,
    package: &str,
    name: TypeName,
    offset: usize,
    text: &str,
) -> Result<MessageDefinition, ParseError> {
    let ctx = Ctx {
        origin: ctx_origin.to_string(),
        package,
        line_offset: offset,
    };
    let mut def = parse_body(&ctx, name, text)?;
    def.source = Some(Arc::from(text));
    Ok(def)
}

fn nested(name: &str, t: TypeName) -> Field {
    Field {
        name: Arc::from(name),
        ty: FieldType::single(BaseType::Nested(t)),
        default: None,
    }
}

fn well_known(pkg: &str, name: &str) -> TypeName {
    TypeName::from_valid_parts(pkg, InterfaceKind::Msg, name)
}

fn composite(
    name: TypeName,
    role: DefinitionRole,
    fields: Vec<Field>,
    source: Option<Arc<str>>,
) -> MessageDefinition {
    MessageDefinition {
        name,
        fields,
        constants: Vec::new(),
        role,
        source,
    }
}

/// Builds the messages rosidl generates for a service named `srv` (whose `_Request` and
/// `_Response` are given): the `_Event` message and the `pkg/srv/Name` composite.
fn service_defs(
    srv: &TypeName,
    mut request: MessageDefinition,
    mut response: MessageDefinition,
    source: Option<Arc<str>>,
) -> Vec<MessageDefinition> {
    let req_name = srv.with_subtype(SubType::Request);
    let resp_name = srv.with_subtype(SubType::Response);
    let event_name = srv.with_subtype(SubType::Event);
    request.name = req_name.clone();
    response.name = resp_name.clone();
    let event = MessageDefinition {
        name: event_name.clone(),
        fields: vec![
            nested("info", well_known("service_msgs", "ServiceEventInfo")),
            Field {
                name: Arc::from("request"),
                ty: FieldType {
                    base: BaseType::Nested(req_name.clone()),
                    container: Container::BoundedSequence(1),
                },
                default: None,
            },
            Field {
                name: Arc::from("response"),
                ty: FieldType {
                    base: BaseType::Nested(resp_name.clone()),
                    container: Container::BoundedSequence(1),
                },
                default: None,
            },
        ],
        constants: Vec::new(),
        role: DefinitionRole::Message,
        source: source.clone(),
    };
    let comp = composite(
        srv.clone(),
        DefinitionRole::Service,
        vec![
            nested("request_message", req_name),
            nested("response_message", resp_name),
            nested("event_message", event_name),
        ],
        source,
    );
    vec![comp, request, response, event]
}

/// Parses a `.srv` text for the service `name` (`pkg/srv/Name`; a sub-type name such as
/// `pkg/srv/Name_Event` is accepted and means its service).
///
/// Returns, in order: the service composite `pkg/srv/Name` (role [`DefinitionRole::Service`]),
/// `Name_Request`, `Name_Response` and `Name_Event` (`service_msgs/ServiceEventInfo info`,
/// `Name_Request[<=1] request`, `Name_Response[<=1] response`).
pub fn parse_srv(name: &TypeName, text: &str) -> Result<Vec<MessageDefinition>, ParseError> {
    let srv = name.interface();
    let origin = srv.to_string();
    let sections = split_sections(text);
    if sections.len() != 2 {
        return Err(ParseError {
            origin,
            line: 0,
            text: String::new(),
            kind: Box::new(ParseErrorKind::ServiceSeparator(sections.len() - 1)),
        });
    }
    let req = section(
        &origin,
        srv.package(),
        srv.with_subtype(SubType::Request),
        sections[0].0,
        &sections[0].1,
    )?;
    let resp = section(
        &origin,
        srv.package(),
        srv.with_subtype(SubType::Response),
        sections[1].0,
        &sections[1].1,
    )?;
    Ok(service_defs(&srv, req, resp, Some(Arc::from(text))))
}

/// Parses a `.action` text for the action `name` (`pkg/action/Name`; sub-type names are
/// accepted and mean their action).
///
/// Returns the action composite (role [`DefinitionRole::Action`]), `_Goal`, `_Result`,
/// `_Feedback`, the `_SendGoal` service (composite, `_Request` = `unique_identifier_msgs/UUID
/// goal_id` + `_Goal goal`, `_Response` = `bool accepted` + `builtin_interfaces/Time stamp`,
/// `_Event`), the `_GetResult` service (`_Request` = `UUID goal_id`, `_Response` = `int8 status`
/// + `_Result result`, `_Event`) and `_FeedbackMessage` (`UUID goal_id` + `_Feedback feedback`).
pub fn parse_action(name: &TypeName, text: &str) -> Result<Vec<MessageDefinition>, ParseError> {
    let action = name.interface();
    let origin = action.to_string();
    let sections = split_sections(text);
    if sections.len() != 3 {
        return Err(ParseError {
            origin,
            line: 0,
            text: String::new(),
            kind: Box::new(ParseErrorKind::ActionSeparator(sections.len() - 1)),
        });
    }
    let pkg = action.package();
    let goal = section(
        &origin,
        pkg,
        action.with_subtype(SubType::Goal),
        sections[0].0,
        &sections[0].1,
    )?;
    let result = section(
        &origin,
        pkg,
        action.with_subtype(SubType::Result),
        sections[1].0,
        &sections[1].1,
    )?;
    let feedback = section(
        &origin,
        pkg,
        action.with_subtype(SubType::Feedback),
        sections[2].0,
        &sections[2].1,
    )?;
    let uuid = well_known("unique_identifier_msgs", "UUID");
    let plain = |name: TypeName, fields: Vec<Field>| MessageDefinition {
        name,
        fields,
        constants: Vec::new(),
        role: DefinitionRole::Message,
        source: None,
    };
    let send_goal = action.with_subtype(SubType::SendGoal);
    let get_result = action.with_subtype(SubType::GetResult);
    let sg_req = plain(
        action.with_subtype(SubType::SendGoalRequest),
        vec![
            nested("goal_id", uuid.clone()),
            nested("goal", goal.name.clone()),
        ],
    );
    let sg_resp = plain(
        action.with_subtype(SubType::SendGoalResponse),
        vec![
            Field {
                name: Arc::from("accepted"),
                ty: FieldType::single(BaseType::Primitive(PrimitiveType::Bool)),
                default: None,
            },
            nested("stamp", well_known("builtin_interfaces", "Time")),
        ],
    );
    let gr_req = plain(
        action.with_subtype(SubType::GetResultRequest),
        vec![nested("goal_id", uuid.clone())],
    );
    let gr_resp = plain(
        action.with_subtype(SubType::GetResultResponse),
        vec![
            Field {
                name: Arc::from("status"),
                ty: FieldType::single(BaseType::Primitive(PrimitiveType::Int8)),
                default: None,
            },
            nested("result", result.name.clone()),
        ],
    );
    let fb_msg = plain(
        action.with_subtype(SubType::FeedbackMessage),
        vec![
            nested("goal_id", uuid),
            nested("feedback", feedback.name.clone()),
        ],
    );
    let comp = composite(
        action.clone(),
        DefinitionRole::Action,
        vec![
            nested("goal", goal.name.clone()),
            nested("result", result.name.clone()),
            nested("feedback", feedback.name.clone()),
            nested("send_goal_service", send_goal.clone()),
            nested("get_result_service", get_result.clone()),
            nested("feedback_message", fb_msg.name.clone()),
        ],
        Some(Arc::from(text)),
    );
    let mut out = vec![comp, goal, result, feedback];
    out.extend(service_defs_named(&send_goal, sg_req, sg_resp));
    out.extend(service_defs_named(&get_result, gr_req, gr_resp));
    out.push(fb_msg);
    Ok(out)
}

/// Like `service_defs` for an action's inner services, whose sub-types are named
/// `Name_SendGoal_Request` etc. (their names are already set).
fn service_defs_named(
    srv: &TypeName,
    request: MessageDefinition,
    response: MessageDefinition,
) -> Vec<MessageDefinition> {
    let event_name = srv.with_subtype(SubType::Event);
    let req_name = request.name.clone();
    let resp_name = response.name.clone();
    let event = MessageDefinition {
        name: event_name.clone(),
        fields: vec![
            nested("info", well_known("service_msgs", "ServiceEventInfo")),
            Field {
                name: Arc::from("request"),
                ty: FieldType {
                    base: BaseType::Nested(req_name.clone()),
                    container: Container::BoundedSequence(1),
                },
                default: None,
            },
            Field {
                name: Arc::from("response"),
                ty: FieldType {
                    base: BaseType::Nested(resp_name.clone()),
                    container: Container::BoundedSequence(1),
                },
                default: None,
            },
        ],
        constants: Vec::new(),
        role: DefinitionRole::Message,
        source: None,
    };
    let comp = composite(
        srv.clone(),
        DefinitionRole::Service,
        vec![
            nested("request_message", req_name),
            nested("response_message", resp_name),
            nested("event_message", event_name),
        ],
        None,
    );
    vec![comp, request, response, event]
}

/// Parses interface text of any kind, chosen by `name`'s namespace: `.msg` text for
/// `pkg/msg/...`, `.srv` text for `pkg/srv/...`, `.action` text for `pkg/action/...`.
pub fn parse_interface(name: &TypeName, text: &str) -> Result<Vec<MessageDefinition>, ParseError> {
    match name.kind() {
        InterfaceKind::Msg => Ok(vec![parse_msg(name, text)?]),
        InterfaceKind::Srv => parse_srv(name, text),
        InterfaceKind::Action => parse_action(name, text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tn(s: &str) -> TypeName {
        TypeName::parse(s).unwrap()
    }

    #[test]
    fn basic_parse() {
        let d = parse_msg(
            &tn("p/msg/M"),
            "# comment\nint32 X=5 # c\nstring S = 'a b'\nuint8[<=4] a [1, 2]\nstring<=3[2] s [\"a,b\", 'c']\nHeader h\nOther o\nq/R[] r\nfloat64 f 1.5\n",
        )
        .unwrap();
        assert_eq!(d.constants.len(), 2);
        assert_eq!(d.constants[0].value, Value::Int32(5));
        assert_eq!(d.constants[1].value, Value::String("a b".into()));
        assert_eq!(d.fields.len(), 6);
        assert_eq!(d.fields[0].ty.container, Container::BoundedSequence(4));
        assert_eq!(
            d.fields[0].default,
            Some(Value::Array(Array::UInt8(vec![1, 2])))
        );
        assert_eq!(
            d.fields[1].default,
            Some(Value::Array(Array::String(vec!["a,b".into(), "c".into()])))
        );
        assert_eq!(
            d.fields[2].ty.nested().unwrap().to_string(),
            "std_msgs/msg/Header"
        );
        assert_eq!(d.fields[3].ty.nested().unwrap().to_string(), "p/msg/Other");
        assert_eq!(d.fields[4].ty.nested().unwrap().to_string(), "q/msg/R");
        assert_eq!(d.fields[5].default, Some(Value::Float64(1.5)));
    }

    #[test]
    fn errors_name_line() {
        let e = parse_msg(&tn("p/msg/M"), "int32 a\nint32\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("p/msg/M:2"), "{e}");
        let e = parse_msg(&tn("p/msg/M"), "int8 a 300\n").unwrap_err();
        assert!(
            matches!(*e.kind, ParseErrorKind::InvalidValue { .. }),
            "{e}"
        );
        let e = parse_msg(&tn("p/msg/M"), "int8[0] a\n").unwrap_err();
        assert!(matches!(*e.kind, ParseErrorKind::InvalidBound(_)), "{e}");
        let e = parse_msg(&tn("p/msg/M"), "int8 a\nint8 a\n").unwrap_err();
        assert!(matches!(*e.kind, ParseErrorKind::DuplicateField(_)), "{e}");
        let e = parse_srv(&tn("p/srv/S"), "int8 a\n").unwrap_err();
        assert!(
            matches!(*e.kind, ParseErrorKind::ServiceSeparator(0)),
            "{e}"
        );
        let e = parse_srv(&tn("p/srv/S"), "int8 a\n---\nbad-type x\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
    }

    #[test]
    fn empty_gets_placeholder() {
        let d = parse_msg(&tn("p/msg/E"), "# nothing\n").unwrap();
        assert!(d.is_empty_placeholder());
    }
}
