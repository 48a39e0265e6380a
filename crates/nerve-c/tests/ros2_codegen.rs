//! The C++ classes `nerve types gen-cpp` generates from ROS 2 interface files
//! (`codegen::ros2`): the example's checked-in headers are what the generator writes now,
//! and the generated CDR code reads every test_msgs fixture (bytes rclpy and Fast DDS
//! wrote) and writes it back exactly as `nerve_ros2_types`' CdrWriter encodes the same
//! values, refuses what the Rust decoder refuses, and default-constructs the `.msg`'s
//! defaults. Skipped (saying so) without g++, unless NERVE_REQUIRE_CPP=1.

use nerve_c::codegen::ros2::ros2_headers;
use nerve_ros2_types::{
    decode, encode, validate, Array, BaseType, Container, Registry, SearchPath, Struct, Value,
};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// ROS 2's test_msgs and the types they use (the same files as Kilted's share).
fn share() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../nerve-ros2-types/tests/fixtures/share")
}

fn search() -> SearchPath {
    let mut s = SearchPath::new();
    s.push_share_dir(share());
    s
}

/// The types of examples/cpp/ros2_types.cpp.
const EXAMPLE_TYPES: [&str; 4] = [
    "test_msgs/msg/UnboundedSequences",
    "test_msgs/msg/BoundedSequences",
    "test_msgs/srv/BasicTypes",
    "test_msgs/action/NestedMessage",
];

/// Every test_msgs message kind (and an action).
const ALL: [&str; 16] = [
    "sensor_msgs/msg/Imu",
    "test_msgs/srv/BasicTypes",
    "test_msgs/msg/Arrays",
    "test_msgs/msg/BasicTypes",
    "test_msgs/msg/BoundedPlainSequences",
    "test_msgs/msg/BoundedSequences",
    "test_msgs/msg/Builtins",
    "test_msgs/msg/Constants",
    "test_msgs/msg/Defaults",
    "test_msgs/msg/Empty",
    "test_msgs/msg/MultiNested",
    "test_msgs/msg/Nested",
    "test_msgs/msg/Strings",
    "test_msgs/msg/UnboundedSequences",
    "test_msgs/msg/WStrings",
    "test_msgs/action/NestedMessage",
];

#[test]
fn the_example_headers_are_what_gen_cpp_writes() {
    let names: Vec<String> = EXAMPLE_TYPES.iter().map(|s| s.to_string()).collect();
    let headers = ros2_headers(&names, &search()).unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cpp/ros2_msgs");
    if std::env::var_os("NERVE_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&dir);
        for (p, text) in &headers {
            let p = dir.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
    }
    let mut on_disk = Vec::new();
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                on_disk.push(e.path().strip_prefix(&dir).unwrap().to_path_buf());
            }
        }
    }
    on_disk.sort();
    let generated: Vec<PathBuf> = headers.iter().map(|(p, _)| p.clone()).collect();
    assert_eq!(
        on_disk, generated,
        "examples/cpp/ros2_msgs holds other headers than gen-cpp writes (NERVE_BLESS=1 rewrites them)"
    );
    for (p, text) in &headers {
        let old = std::fs::read_to_string(dir.join(p)).unwrap();
        assert!(
            old == *text,
            "examples/cpp/ros2_msgs/{} is out of date (NERVE_BLESS=1 cargo test -p nerve-c --test ros2_codegen rewrites it)",
            p.display()
        );
    }
}

#[test]
fn a_nested_time_is_nerves_own_and_no_header_of_it_is_written() {
    let names = vec!["test_msgs/msg/Builtins".to_string()];
    let headers = ros2_headers(&names, &search()).unwrap();
    let paths: Vec<String> = headers
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    assert_eq!(
        paths,
        [
            "builtin_interfaces/msg/duration.hpp",
            "test_msgs/msg/builtins.hpp"
        ]
    );
    let text = &headers[1].1;
    assert!(
        text.contains("  ::nerve::msgs::Time time_value{};"),
        "{text}"
    );
    assert!(text.contains("#include <nerve/msgs/time.hpp>"), "{text}");
    assert!(
        text.contains("  ::builtin_interfaces::msg::Duration duration_value{};"),
        "{text}"
    );
}

#[test]
fn a_ros2_type_that_is_nerves_own_is_its_plain_struct() {
    // geometry_msgs/Twist is nerve_msgs/Twist exactly: an alias, no CDR class
    let names = vec!["geometry_msgs/msg/Twist".to_string()];
    let headers = ros2_headers(&names, &search()).unwrap();
    assert_eq!(headers.len(), 1);
    assert_eq!(
        headers[0].0.display().to_string(),
        "geometry_msgs/msg/twist.hpp"
    );
    let text = &headers[0].1;
    assert!(text.contains("#include <nerve/msgs/twist.hpp>"), "{text}");
    assert!(
        text.contains("using Twist = ::nerve::msgs::Twist;"),
        "{text}"
    );
    // Imu is not (Nerve's drops the frame id): a CDR class whose nested Vector3 is
    // Nerve's; its Quaternion (w defaults to 1) and Header (a string frame id) generated
    let names = vec!["sensor_msgs/msg/Imu".to_string()];
    let headers = ros2_headers(&names, &search()).unwrap();
    let paths: Vec<String> = headers
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    assert_eq!(
        paths,
        [
            "geometry_msgs/msg/quaternion.hpp",
            "sensor_msgs/msg/imu.hpp",
            "std_msgs/msg/header.hpp"
        ]
    );
    assert!(headers[1]
        .1
        .contains("  ::geometry_msgs::msg::Quaternion orientation{};"));
    assert!(headers[1]
        .1
        .contains("  ::nerve::msgs::Vector3 angular_velocity{};"));
    assert!(headers[1].1.contains("  ::std_msgs::msg::Header header{};"));
    assert!(headers[2].1.contains("  ::nerve::msgs::Time stamp{};"));
}

#[test]
fn a_type_not_on_the_search_path_or_with_a_name_cpp_cannot_hold_is_refused() {
    let e = ros2_headers(&["test_msgs/msg/Nope".to_string()], &search()).unwrap_err();
    assert!(e.to_string().contains("test_msgs/msg/Nope"), "{e}");
    let dir = std::env::temp_dir().join(format!("nerve_ros2_codegen_{}", std::process::id()));
    let msg = dir.join("kw_msgs/msg");
    std::fs::create_dir_all(&msg).unwrap();
    std::fs::write(msg.join("Bad.msg"), "int32 class\n").unwrap();
    let mut s = SearchPath::new();
    s.push_share_dir(&dir);
    let e = ros2_headers(&["kw_msgs/msg/Bad".to_string()], &s).unwrap_err();
    assert!(
        e.to_string()
            .contains("field \"class\" cannot be a C++ name"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn have_gxx() -> bool {
    let ok = Command::new("g++")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("NERVE_REQUIRE_CPP").as_deref() != Ok("1"),
            "g++ is not installed (NERVE_REQUIRE_CPP=1)"
        );
        eprintln!("skipped: g++ is not installed");
    }
    ok
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// The C++ name of a message type.
fn cpp(t: &str) -> String {
    format!("::{}", t.replace('/', "::"))
}

/// A program that reads `rt <type> <hex>` (read the CDR into the class, write it back) and
/// `def <type>` (write a default-constructed one) lines and answers `ok <hex>` or
/// `err <what>` for each; then checks that a bound exceeded is refused when written.
fn program(types: &[String]) -> String {
    // a service's header too: its nerve::Client/Server specializations compile as strictly
    let mut s = String::from("#include <cstdio>\n#include <iostream>\n#include <map>\n#include <functional>\n#include <string>\n#include <vector>\n#include <test_msgs/srv/basic_types.hpp>\n");
    for t in types {
        let (pkg, rest) = t.split_once('/').unwrap();
        let (kind, name) = rest.split_once('/').unwrap();
        let header = if kind == "action" {
            let base = name.split('_').next().unwrap();
            format!("{pkg}/action/{}.hpp", nerve_c::codegen::snake_case(base))
        } else {
            format!("{pkg}/{kind}/{}.hpp", nerve_c::codegen::snake_case(name))
        };
        s.push_str(&format!("#include <{header}>\n"));
    }
    s.push_str(
        r#"
using Bytes = std::vector<std::uint8_t>;
template <class T>
Bytes round_trip(const Bytes& in) {
  T m = nerve::cdr::deserialize<T>(in.data(), in.size());
  return nerve::cdr::serialize(m);
}
template <class T>
Bytes defaults(const Bytes&) { return nerve::cdr::serialize(T{}); }
static std::string hex(const Bytes& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (auto x : b) { s += d[x >> 4]; s += d[x & 15]; }
  return s;
}
static Bytes unhex(const std::string& s) {
  Bytes b;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2) b.push_back(static_cast<std::uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
  return b;
}
int main() {
  std::map<std::string, std::function<Bytes(const Bytes&)>> rt, def;
"#,
    );
    for t in types {
        s.push_str(&format!(
            "  rt[\"{t}\"] = round_trip<{c}>;\n  def[\"{t}\"] = defaults<{c}>;\n",
            c = cpp(t)
        ));
    }
    s.push_str(
        r#"  std::string op, type, h;
  while (std::cin >> op >> type) {
    if (op == "rt") { std::cin >> h; h = h.substr(1); } else h.clear();
    auto& table = op == "rt" ? rt : def;
    auto f = table.find(type);
    if (f == table.end()) { std::printf("err no type %s\n", type.c_str()); continue; }
    try {
      std::printf("ok %s\n", hex(f->second(unhex(h))).c_str());
    } catch (const nerve::cdr::Error& e) {
      std::printf("err %s\n", e.what());
    }
  }
  // bounds are checked when written, never cut
  test_msgs::msg::BoundedSequences b;
  b.int32_values = {1, 2, 3, 4};
  try { (void)nerve::cdr::serialize(b); std::printf("bound not refused\n"); }
  catch (const nerve::cdr::Error& e) { std::printf("bound %s\n", e.what()); }
  test_msgs::msg::Strings s;
  s.bounded_string_value = std::string(23, 'x');
  try { (void)nerve::cdr::serialize(s); std::printf("string bound not refused\n"); }
  catch (const nerve::cdr::Error& e) { std::printf("string bound %s\n", e.what()); }
  s.bounded_string_value.clear();
  s.string_value = "\xff";
  try { (void)nerve::cdr::serialize(s); std::printf("utf8 not refused\n"); }
  catch (const nerve::cdr::Error& e) { std::printf("utf8 %s\n", e.what()); }
  return 0;
}
"#,
    );
    s
}

/// `v` (of ROS 2 type `ty`) with every `builtin_interfaces/Time` normalized as
/// `nerve::msgs::Time` holds it (nanosec below 1e9); `Err` when its seconds leave int32.
fn normalize(reg: &Registry, ty: &str, v: &mut Value) -> Result<(), String> {
    let Value::Struct(s) = v else { return Ok(()) };
    if ty == "builtin_interfaces/msg/Time" {
        let sec = s.get("sec").and_then(Value::as_i64).unwrap();
        let ns = s.get("nanosec").and_then(Value::as_i64).unwrap();
        let nanos = i128::from(sec) * 1_000_000_000 + i128::from(ns);
        let sec = i32::try_from(nanos.div_euclid(1_000_000_000))
            .map_err(|_| "out of builtin_interfaces/Time's range".to_string())?;
        s.set("sec", Value::Int32(sec));
        s.set(
            "nanosec",
            Value::UInt32(nanos.rem_euclid(1_000_000_000) as u32),
        );
        return Ok(());
    }
    let def = reg.resolve(ty).unwrap().clone();
    for f in &def.fields {
        let BaseType::Nested(n) = &f.ty.base else {
            continue;
        };
        let Some(fv) = s.get_mut(&f.name) else {
            continue;
        };
        match (f.ty.container, fv) {
            (Container::Single, fv) => normalize(reg, n.as_str(), fv)?,
            (_, Value::Array(Array::Struct(items))) => {
                for it in items.iter_mut() {
                    let mut x = Value::Struct(std::mem::replace(it, Struct::new()));
                    normalize(reg, n.as_str(), &mut x)?;
                    let Value::Struct(x) = x else { unreachable!() };
                    *it = x;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[test]
fn generated_cdr_code_reads_and_writes_every_test_msgs_fixture_as_cdr_writer_does() {
    if !have_gxx() {
        return;
    }
    let names: Vec<String> = ALL.iter().map(|s| s.to_string()).collect();
    let headers = ros2_headers(&names, &search()).unwrap();
    let dir = std::env::temp_dir().join(format!("nerve_ros2_rt_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (p, text) in &headers {
        let p = dir.join("gen").join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    // the message types: every test_msgs .msg above, the action's goal/result/feedback
    let mut types: Vec<String> = ALL
        .iter()
        .filter(|t| t.contains("/msg/"))
        .map(|s| s.to_string())
        .collect();
    types.push("std_msgs/msg/Header".into());
    types.push("geometry_msgs/msg/Quaternion".into());
    for sub in ["_Goal", "_Result", "_Feedback"] {
        types.push(format!("test_msgs/action/NestedMessage{sub}"));
    }
    types.push("builtin_interfaces/msg/Duration".into());
    let src = dir.join("rt.cpp");
    std::fs::write(&src, program(&types)).unwrap();
    let exe = dir.join("rt");
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    let out = Command::new("g++")
        .args([
            "-std=c++17",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Wpedantic",
            "-Werror",
            "-Wsign-conversion",
        ])
        .arg("-I")
        .arg(&include)
        .arg("-I")
        .arg(dir.join("gen"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "g++ failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut reg = Registry::new();
    for t in &types {
        reg.load(t, &search()).unwrap();
    }
    // the requests, and what the Rust codec says of each
    let mut input = String::new();
    let mut expect: Vec<(String, Result<Vec<u8>, String>)> = Vec::new();
    let fixtures =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../nerve-ros2-types/tests/fixtures/cdr");
    let mut by_type: BTreeMap<String, usize> = BTreeMap::new();
    for e in std::fs::read_dir(&fixtures).unwrap().flatten() {
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap();
        let ty = j["type"].as_str().unwrap().to_string();
        if !types.contains(&ty) {
            continue;
        }
        for (i, s) in j["samples"].as_array().unwrap().iter().enumerate() {
            let bytes = unhex(s["hex"].as_str().unwrap());
            let mut v = decode(&reg, &ty, &bytes).unwrap();
            let want = normalize(&reg, &ty, &mut v).map(|()| {
                let mut out = Vec::new();
                encode(&reg, &ty, &v, &mut out).unwrap();
                out
            });
            input.push_str(&format!("rt {ty} x{}\n", hex(&bytes)));
            expect.push((format!("{ty} sample {i}"), want));
            *by_type.entry(ty.clone()).or_default() += 1;
            if i == 1 {
                // every shorter prefix: refused where the Rust decoder refuses it
                for n in 0..bytes.len() {
                    let cut = &bytes[..n];
                    input.push_str(&format!("rt {ty} x{}\n", hex(cut)));
                    let want = match validate(&reg, &ty, cut) {
                        Ok(()) => {
                            let mut v = decode(&reg, &ty, cut).unwrap();
                            normalize(&reg, &ty, &mut v).map(|()| {
                                let mut out = Vec::new();
                                encode(&reg, &ty, &v, &mut out).unwrap();
                                out
                            })
                        }
                        Err(e) => Err(format!("refused: {e}")),
                    };
                    expect.push((format!("{ty} sample {i} cut to {n} bytes"), want));
                }
            }
        }
    }
    // a bool of 2 and a string that is not UTF-8 are refused by both
    let mut bad_bool = unhex("00010000");
    bad_bool.push(2);
    bad_bool.extend([0u8; 64]);
    input.push_str(&format!(
        "rt test_msgs/msg/BasicTypes x{}\n",
        hex(&bad_bool)
    ));
    expect.push((
        "a bool of 2".into(),
        Err(validate(&reg, "test_msgs/msg/BasicTypes", &bad_bool)
            .unwrap_err()
            .to_string()),
    ));
    for t in &types {
        input.push_str(&format!("def {t}\n"));
        let v = Value::default_for(&reg, t).unwrap();
        let mut out = Vec::new();
        encode(&reg, t, &v, &mut out).unwrap();
        expect.push((format!("{t} default"), Ok(out)));
    }
    for t in ALL.iter().filter(|t| t.contains("/msg/")) {
        assert!(
            by_type.get(*t).is_some_and(|n| *n > 0) || *t == "test_msgs/msg/Empty",
            "no fixture of {t}"
        );
    }

    let mut child = Command::new(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // written from another thread: the answers fill the pipe while the requests go in
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), expect.len() + 3, "{text}");
    let mut cut_refusals = 0;
    for (line, (what, want)) in lines.iter().zip(&expect) {
        match want {
            Ok(bytes) => assert_eq!(
                *line,
                format!("ok {}", hex(bytes)),
                "{what}: C++ wrote other bytes than CdrWriter"
            ),
            Err(reason) => {
                assert!(
                    line.starts_with("err "),
                    "{what}: C++ took it ({line}); Rust: {reason}"
                );
                cut_refusals += 1;
            }
        }
    }
    assert!(cut_refusals > 100, "{cut_refusals} refusals");
    let tail = &lines[expect.len()..];
    assert!(
        tail[0].starts_with("bound int32_values: 4 elements exceed its bound of 3"),
        "{tail:?}"
    );
    assert!(
        tail[1].starts_with(
            "string bound bounded_string_value: a string of 23 bytes exceeds its bound of 22"
        ),
        "{tail:?}"
    );
    assert!(
        tail[2].starts_with("utf8 string_value: a string that is not UTF-8"),
        "{tail:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
