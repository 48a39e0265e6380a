//! The C++ and C message headers: the checked-in built-in headers are what the generator
//! writes, every generated header compiles (so a real compiler checks every
//! static_assert of size, alignment and offset), generation refuses what C++ or C cannot
//! express by name, the C macros hold the very schema texts, and `NERVE_MESSAGE`
//! describes a C++ struct with the schema and layout hash of the equivalent Rust struct.

use nerve::message::schema::{Field, Prim, Schema, SchemaError, Shape, StructShape};
use nerve_c::codegen::{self, ActionDef, CodegenError, Lang, ServiceDef};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The crate's `include` directory.
fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nerve-c-codegen-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every file under `dir`, relative to `base`.
fn files_under(dir: &Path, base: &Path, out: &mut BTreeSet<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, base, out);
        } else if let Ok(rel) = p.strip_prefix(base) {
            out.insert(rel.to_path_buf());
        }
    }
}

/// Writes `headers` under `dir`.
fn write_headers(dir: &Path, headers: &[(PathBuf, String)]) {
    for (path, text) in headers {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// Whether g++ is there; says why a test is skipped when it is not.
fn have_gxx(test: &str) -> bool {
    let ok = Command::new("g++")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("{test}: skipped: g++ is not installed");
    }
    ok
}

/// The warnings every C++ check compiles with: all of them, the conversions that change
/// a value or its sign included, each an error (what a strict user turns on).
const CXX_WARNINGS: [&str; 6] = [
    "-Wall",
    "-Wextra",
    "-Wpedantic",
    "-Wconversion",
    "-Wsign-conversion",
    "-Werror",
];

/// The C++ compilers to check with: g++, and clang++ where it is installed.
fn cxx_compilers() -> Vec<&'static str> {
    ["g++", "clang++"]
        .into_iter()
        .filter(|c| {
            Command::new(c)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect()
}

/// Compiles C++ `source` (syntax only) with the include directories, with every C++
/// compiler there is ([`cxx_compilers`]) and [`CXX_WARNINGS`]; panics with the
/// compiler's output when one fails.
fn gxx_check(std: &str, source: &str, includes: &[&Path], what: &str) {
    for cxx in cxx_compilers() {
        let mut cmd = Command::new(cxx);
        cmd.arg(format!("-std={std}"))
            .arg("-fsyntax-only")
            .args(CXX_WARNINGS);
        for i in includes {
            cmd.arg("-I").arg(i);
        }
        let mut child = cmd
            .args(["-x", "c++", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run the C++ compiler");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(source.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{cxx} -std={std} refuses {what}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn builtin_headers_are_checked_in() {
    let mut generated = codegen::builtin_headers().expect("the built-in types generate");
    generated.extend(codegen::builtin_c_headers().expect("the built-in C headers generate"));
    let include = include_dir();
    if std::env::var_os("NERVE_BLESS").is_some_and(|v| v == "1") {
        let mut stale = BTreeSet::new();
        files_under(&include.join("nerve/msgs"), &include, &mut stale);
        for (path, _) in &generated {
            stale.remove(path);
        }
        for p in stale {
            std::fs::remove_file(include.join(p)).unwrap();
        }
        write_headers(&include, &generated);
    }
    let fix = "run `cargo run -p nerve-cli -- types gen-cpp --out crates/nerve-c/include` \
               and `cargo run -p nerve-cli -- types gen-c --out crates/nerve-c/include` \
               (or NERVE_BLESS=1 cargo test -p nerve-c --test codegen) and check in the result";
    let mut problems = Vec::new();
    let mut expected = BTreeSet::new();
    for (path, text) in &generated {
        expected.insert(path.clone());
        match std::fs::read_to_string(include.join(path)) {
            Ok(on_disk) if on_disk == *text => {}
            Ok(_) => problems.push(format!("{} differs", path.display())),
            Err(_) => problems.push(format!("{} is missing", path.display())),
        }
    }
    let mut on_disk = BTreeSet::new();
    files_under(&include.join("nerve/msgs"), &include, &mut on_disk);
    for extra in on_disk.difference(&expected) {
        problems.push(format!("{} is not generated", extra.display()));
    }
    assert!(
        problems.is_empty(),
        "the checked-in C++ and C headers are stale: {}; {fix}",
        problems.join(", ")
    );
}

#[test]
fn builtin_headers_cover_every_type_once() {
    let headers = codegen::builtin_headers().unwrap();
    let paths: Vec<&Path> = headers.iter().map(|(p, _)| p.as_path()).collect();
    let unique: BTreeSet<&Path> = paths.iter().copied().collect();
    assert_eq!(unique.len(), paths.len(), "one header per type");
    assert!(paths.windows(2).all(|w| w[0] < w[1]), "sorted by path");
    for p in [
        "nerve/msgs/imu.hpp",
        "nerve/msgs/header.hpp",
        "nerve/msgs/vector3.hpp",
        "nerve/msgs/point_field.hpp",
        "nerve/msgs/add_two_ints.hpp",
        "nerve/msgs/fibonacci.hpp",
        "nerve/msgs/two_ints.hpp",
    ] {
        assert!(unique.contains(Path::new(p)), "{p} in {paths:?}");
    }
    let text = |p: &str| {
        &headers
            .iter()
            .find(|(q, _)| q == Path::new(p))
            .unwrap_or_else(|| panic!("{p}"))
            .1
    };
    // a nested struct is defined by its own header and included where it is used
    let odometry = text("nerve/msgs/odometry.hpp");
    assert!(
        odometry.contains("#include <nerve/msgs/header.hpp>"),
        "{odometry}"
    );
    assert!(
        odometry.contains("#include <nerve/msgs/twist.hpp>"),
        "{odometry}"
    );
    assert!(!odometry.contains("struct Header {"), "{odometry}");
    assert!(
        odometry.contains("  ::nerve::FixedStr<64> child_frame_id;"),
        "{odometry}"
    );
    assert!(odometry.contains("static_assert(offsetof(Odometry, twist_covariance) == "));
    let definitions = headers
        .iter()
        .filter(|(_, t)| t.contains("struct Header {"))
        .count();
    assert_eq!(definitions, 1, "Header is defined once");
    let imu = text("nerve/msgs/imu.hpp");
    assert!(imu.starts_with("// generated by `nerve types gen-cpp` from schema nerve_msgs/Imu"));
    assert!(imu.contains("do not edit"));
    let hash = nerve::TypeInfo::of::<nerve_msgs::Imu>().layout_hash;
    assert!(
        imu.contains(&format!("layout_hash = 0x{hash:016x}ULL;")),
        "{imu}"
    );
    assert!(imu.contains("using elem_type = ::nerve::no_elem;"));
    let scan = text("nerve/msgs/laser_scan.hpp");
    assert!(scan.contains("using elem_type = float;"), "{scan}");
    let add = text("nerve/msgs/add_two_ints.hpp");
    assert!(add.contains("struct AddTwoInts {};"), "{add}");
    assert!(
        add.contains("using request = ::nerve::msgs::TwoInts;"),
        "{add}"
    );
    let fib = text("nerve/msgs/fibonacci.hpp");
    assert!(
        fib.contains("using feedback = ::nerve::msgs::FibonacciSequence;"),
        "{fib}"
    );
    // the empty message: C++ gives it a byte, its traits say 0
    let empty = text("nerve/msgs/empty.hpp");
    assert!(
        empty.contains("static_assert(std::is_empty_v<Empty>);"),
        "{empty}"
    );
    assert!(empty.contains("head_size = 0;"), "{empty}");
    assert_eq!(
        codegen::builtin_headers().unwrap(),
        headers,
        "deterministic"
    );
}

/// The schema texts the generated headers hold are the Rust schemas.
#[test]
fn generated_schema_texts_are_the_rust_schemas() {
    let headers = codegen::builtin_headers().unwrap();
    for schema in nerve_msgs::schemas() {
        let short = schema.name.rsplit('/').next().unwrap();
        let path = PathBuf::from(format!("nerve/msgs/{}.hpp", codegen::snake_case(short)));
        let text = &headers.iter().find(|(p, _)| *p == path).unwrap().1;
        // the literal's pieces joined again
        let start = text.find("schema_text =\n").unwrap();
        let joined: String = text[start..]
            .lines()
            .skip(1)
            .take_while(|l| l.trim_start().starts_with('"'))
            .map(|l| {
                let l = l.trim().trim_end_matches(';');
                l[1..l.len() - 1].replace("\\?", "?")
            })
            .collect();
        assert_eq!(joined, schema.encode(), "{}", schema.name);
    }
}

#[test]
fn generated_headers_compile() {
    if !have_gxx("generated_headers_compile") {
        return;
    }
    let include = include_dir();
    let headers = codegen::builtin_headers().unwrap();
    // each header on its own (it includes what it needs), a few at a time: the generated
    // ones and the hand-written API headers
    let hand_written: Vec<PathBuf> = [
        "nerve.hpp",
        "nerve/traits.hpp",
        "nerve/message.hpp",
        "nerve/lifecycle.hpp",
        "nerve/tf.hpp",
        "nerve/time.hpp",
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect();
    let generated: Vec<&PathBuf> = headers.iter().map(|(p, _)| p).collect();
    let jobs: Vec<&PathBuf> = generated.iter().copied().chain(&hand_written).collect();
    std::thread::scope(|s| {
        for chunk in jobs.chunks(jobs.len().div_ceil(4)) {
            let include = &include;
            s.spawn(move || {
                for p in chunk {
                    let src = format!("#include <{}>\n", p.display());
                    gxx_check("c++17", &src, &[include], &p.display().to_string());
                }
            });
        }
    });
    // all of them together, each twice, with the macro header, in C++20
    let mut all = String::from("#include <nerve/message.hpp>\n");
    for _ in 0..2 {
        for p in &generated {
            all.push_str(&format!("#include <{}>\n", p.display()));
        }
    }
    all.push_str("static_assert(nerve::message_traits<nerve::msgs::Imu>::sealed);\n");
    gxx_check("c++20", &all, &[&include], "all the headers together");
}

/// `my_pkg/Pose2D` of the brief: three f64.
#[derive(Clone, Copy, nerve::Message)]
#[repr(C)]
#[message(name = "my_pkg/Pose2D")]
struct Pose2D {
    x: f64,
    y: f64,
    theta: f64,
}

#[derive(Clone, Copy, nerve::Pod)]
#[repr(C)]
struct Corner {
    x: f32,
    y: f32,
}

/// A user message with everything a field can be: a generated nested type, arrays of
/// structs, C arrays, a fixed string, a hand-written plain-data type.
#[derive(Clone, Copy, nerve::Message)]
#[repr(C)]
#[message(name = "my_pkg/Marker", elem = Corner)]
struct Marker {
    header: nerve_msgs::Header,
    pose: Pose2D,
    corners: [Corner; 4],
    flags: [u32; 2],
    label: nerve_msgs::FixedStr<16>,
    blob: Blob,
    id: i16,
    kind: u8,
    reserved: u8,
}

/// A hand-written plain-data type: opaque to schemas.
#[derive(Clone, Copy)]
#[repr(C, align(4))]
struct Blob([u8; 12]);
// SAFETY: a byte array: no padding, every bit pattern valid.
unsafe impl nerve::Pod for Blob {
    const LAYOUT_HASH: u64 = 0x0123_4567_89ab_cdef;
}

#[test]
fn a_user_schema_generates_its_package() {
    let schemas = [Schema::of::<Pose2D>(), Schema::of::<Marker>()];
    let headers = codegen::cpp_headers(&schemas, &[], &[]).unwrap();
    let paths: Vec<String> = headers
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    // a nested nerve_msgs::Header (and its Time) is Nerve's own, in its installed header,
    // not a my_pkg::Header that C++ would take for another type (issue 45)
    assert_eq!(
        paths,
        [
            "my_pkg/corner.hpp",
            "my_pkg/marker.hpp",
            "my_pkg/pose2_d.hpp"
        ]
    );
    let pose = &headers[2].1;
    assert!(pose.contains("namespace my_pkg {"), "{pose}");
    assert!(
        pose.contains("struct Pose2D {\n  double x;\n  double y;\n  double theta;\n};"),
        "{pose}"
    );
    for (field, offset) in [("x", 0), ("y", 8), ("theta", 16)] {
        assert!(pose.contains(&format!(
            "static_assert(offsetof(Pose2D, {field}) == {offset});"
        )));
    }
    assert!(pose.contains("static_assert(sizeof(Pose2D) == 24);"));
    let marker = &headers[1].1;
    assert!(
        marker.contains("  ::nerve::msgs::Header header;"),
        "Nerve's own Header: {marker}"
    );
    assert!(
        marker.contains("#include <nerve/msgs/header.hpp>"),
        "{marker}"
    );
    assert!(
        marker.contains("  Pose2D pose;"),
        "a message nested in another: {marker}"
    );
    assert!(marker.contains("#include <my_pkg/pose2_d.hpp>"), "{marker}");
    assert!(
        marker.contains("  ::nerve::Opaque<12, 4, 0x0123456789abcdefULL> blob;"),
        "{marker}"
    );
    assert!(
        marker.contains("using elem_type = ::my_pkg::Corner;"),
        "{marker}"
    );
    if !have_gxx("a_user_schema_generates_its_package") {
        return;
    }
    let dir = scratch("user");
    write_headers(&dir, &headers);
    for (p, _) in &headers {
        let src = format!("#include <{}>\n", p.display());
        gxx_check(
            "c++17",
            &src,
            &[&dir, &include_dir()],
            &p.display().to_string(),
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

fn f64_field(name: &str, offset: usize) -> Field {
    Field {
        name: name.into(),
        offset,
        shape: Shape::Prim(Prim::F64),
    }
}

/// A schema of one struct head, its hash made right.
fn schema_of(type_name: &str, head: StructShape) -> Schema {
    let mut s = Schema {
        name: type_name.into(),
        layout_hash: 0,
        head: Shape::Struct(head),
        elem: None,
        foreign: None,
    };
    s.layout_hash = s.computed_hash();
    s
}

fn point(name: &str, fields: &[&str]) -> StructShape {
    StructShape {
        name: name.into(),
        size: 8 * fields.len(),
        align: 8,
        fields: fields
            .iter()
            .enumerate()
            .map(|(i, f)| f64_field(f, 8 * i))
            .collect(),
    }
}

#[test]
fn what_cpp_cannot_name_or_express_is_refused_by_name() {
    let gen = |schemas: &[Schema]| codegen::cpp_headers(schemas, &[], &[]);
    // names
    for bad in [
        "Pose",
        "my-pkg/Pose",
        "nerve/Pose",
        "pkg/class",
        "pkg/_Pose",
    ] {
        let e = gen(&[schema_of(bad, point("Pose", &["x"]))]).unwrap_err();
        assert!(matches!(e, CodegenError::BadName { .. }), "{bad}: {e}");
        assert!(e.to_string().contains(bad), "{e}");
    }
    let e = gen(&[schema_of("pkg/P", point("P", &["x", "new"]))]).unwrap_err();
    assert!(
        matches!(&e, CodegenError::BadName { name, .. } if name == "new"),
        "{e}"
    );
    let mut nested = point("Outer", &["a"]);
    nested.fields[0].shape = Shape::Struct(point("template", &["x"]));
    let e = gen(&[schema_of("pkg/Outer", nested)]).unwrap_err();
    assert!(matches!(e, CodegenError::BadName { .. }), "{e}");
    // a field named as the type of another field would change that name's meaning
    let mut shadow = point("Shadow", &["Inner", "b"]);
    shadow.fields[1].shape = Shape::Struct(point("Inner", &["x"]));
    let e = gen(&[schema_of("pkg/Shadow", shadow)]).unwrap_err();
    assert!(matches!(e, CodegenError::BadName { .. }), "{e}");

    // two structs of one name in one package
    let mut a = point("A", &["h"]);
    a.fields[0].shape = Shape::Struct(point("Header", &["x"]));
    let mut b = point("B", &["h"]);
    b.fields[0].shape = Shape::Struct(point("Header", &["y"]));
    let e = gen(&[schema_of("pkg/A", a.clone()), schema_of("pkg/B", b)]).unwrap_err();
    assert!(matches!(e, CodegenError::Conflict { .. }), "{e}");
    assert!(e.to_string().contains("::pkg::Header"), "{e}");
    // in two packages they are two types
    let mut b = point("B", &["h"]);
    b.fields[0].shape = Shape::Struct(point("Header", &["y"]));
    gen(&[schema_of("pkg/A", a), schema_of("other/B", b)]).unwrap();
    // header files that would collide
    let e = gen(&[
        schema_of("pkg/PoseA", point("PoseA", &["x"])),
        schema_of("pkg/Pose_A", point("Pose_A", &["x"])),
    ])
    .unwrap_err();
    assert!(matches!(e, CodegenError::PathCollision { .. }), "{e}");
    // one type given twice, differently
    let e = gen(&[
        schema_of("pkg/P", point("P", &["x"])),
        schema_of("pkg/P", point("P", &["y"])),
    ])
    .unwrap_err();
    assert!(matches!(e, CodegenError::DuplicateType { .. }), "{e}");

    // layouts C++ cannot express: a zero-length array, an empty nested struct, an
    // opaque type whose size is no multiple of its alignment (C++ would pad it)
    let field = |name: &str, offset, shape| Field {
        name: name.to_string(),
        offset,
        shape,
    };
    let strukt = |name: &str, size, align, fields| StructShape {
        name: name.into(),
        size,
        align,
        fields,
    };
    let u32_field = field("v", 0, Shape::Prim(Prim::U32));
    let zero = Shape::Array {
        elem: Box::new(Shape::Prim(Prim::U8)),
        len: 0,
    };
    let empty = Shape::Struct(strukt("Nothing", 0, 1, vec![]));
    let opaque = |size, align| Shape::Opaque {
        size,
        align,
        hash: 7,
    };
    for (what, fields, size) in [
        (
            "zero-length",
            vec![field("z", 0, zero), u32_field.clone()],
            4,
        ),
        ("empty struct", vec![field("e", 0, empty), u32_field], 4),
        (
            "6 bytes aligned to 4",
            vec![
                field("o", 0, opaque(6, 4)),
                field("p", 6, Shape::Prim(Prim::U16)),
            ],
            8,
        ),
    ] {
        let s = schema_of("pkg/Odd", strukt("Odd", size, 4, fields));
        Schema::decode(&s.encode()).expect("a layout Rust accepts");
        let e = gen(&[s]).unwrap_err();
        assert!(
            matches!(e, CodegenError::Unrepresentable { .. }),
            "{what}: {e}"
        );
        assert!(e.to_string().contains("Odd"), "{e}");
    }
    let fine = strukt("Fine", 8, 2, vec![field("o", 0, opaque(8, 2))]);
    gen(&[schema_of("pkg/Fine", fine)]).unwrap();

    // a schema whose hash is not its layout's
    let mut lie = schema_of("pkg/P", point("P", &["x"]));
    lie.layout_hash ^= 1;
    let e = gen(&[lie]).unwrap_err();
    assert!(
        matches!(
            e,
            CodegenError::InvalidSchema {
                source: SchemaError::HashMismatch { .. },
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn services_and_actions_need_their_messages() {
    let pose = Schema::of::<Pose2D>();
    let service = ServiceDef {
        name: "my_pkg/Locate".into(),
        request: "my_pkg/Pose2D".into(),
        response: "my_pkg/Nowhere".into(),
    };
    let e = codegen::cpp_headers(
        std::slice::from_ref(&pose),
        std::slice::from_ref(&service),
        &[],
    )
    .unwrap_err();
    assert!(
        matches!(&e, CodegenError::UnknownType { name, .. } if name == "my_pkg/Nowhere"),
        "{e}"
    );
    assert!(e.to_string().contains("my_pkg/Locate"), "{e}");
    let action = ActionDef {
        name: "my_pkg/Pose2D".into(),
        goal: "my_pkg/Pose2D".into(),
        feedback: "my_pkg/Pose2D".into(),
        result: "my_pkg/Pose2D".into(),
    };
    let e = codegen::cpp_headers(std::slice::from_ref(&pose), &[], &[action]).unwrap_err();
    assert!(
        matches!(e, CodegenError::Conflict { .. }),
        "an action named as a message: {e}"
    );
    let ok = ServiceDef {
        response: "my_pkg/Pose2D".into(),
        ..service
    };
    let headers = codegen::cpp_headers(&[pose], &[ok], &[]).unwrap();
    assert_eq!(headers[0].0, PathBuf::from("my_pkg/locate.hpp"));
}

/// A schema text with an unknown nested type is refused when it is decoded, before
/// generation; the seal refuses it the same way.
#[test]
fn an_unknown_nested_type_is_refused() {
    let text = "nerve-schema/1|type=my_pkg/P|hash=0000000000000000|head=P|elem=-\
                |struct P 8 8 inner:0:Inner";
    let e = codegen::seal(text).unwrap_err();
    assert!(
        matches!(&e, SchemaError::Layout { reason, .. } if reason.contains("Inner")),
        "{e}"
    );
}

#[test]
fn sealing_fills_in_only_the_unsealed_hash() {
    let schema = Schema::of::<Pose2D>();
    let text = schema.encode();
    assert_eq!(codegen::seal(&text).unwrap(), schema, "a sealed text stays");
    let hash = format!("hash={:016x}", schema.layout_hash);
    let unsealed = text.replace(&hash, &format!("hash={}", codegen::UNSEALED_HASH));
    assert_eq!(codegen::seal(&unsealed).unwrap(), schema);
    let lie = text.replace(&hash, "hash=0000000000000001");
    assert!(matches!(
        codegen::seal(&lie),
        Err(SchemaError::HashMismatch { .. })
    ));
}

/// What a C++ program prints of message types: type name, tab, schema text, a line each.
fn run_cpp(name: &str, source: &str) -> Option<Vec<(String, String)>> {
    run_cpp_in(name, source, &[])
}

/// [`run_cpp`] with more include directories.
fn run_cpp_in(name: &str, source: &str, includes: &[&Path]) -> Option<Vec<(String, String)>> {
    if !have_gxx(name) {
        return None;
    }
    let dir = scratch(name);
    let src = dir.join("main.cpp");
    let exe = dir.join("main");
    std::fs::write(&src, source).unwrap();
    let mut cmd = Command::new("g++");
    for i in includes {
        cmd.arg("-I").arg(i);
    }
    let out = cmd
        .arg("-std=c++17")
        .args(CXX_WARNINGS)
        .arg("-I")
        .arg(include_dir())
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "g++ refuses the NERVE_MESSAGE program:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    let _ = std::fs::remove_dir_all(dir);
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
    )
}

/// A C++ twin of the Rust `Marker` (its head), declared with the macros.
#[derive(Clone, Copy, nerve::Message)]
#[repr(C)]
#[message(name = "my_pkg/Scene")]
struct Scene {
    header: nerve_msgs::Header,
    pose: Pose2D,
    corners: [Corner; 4],
    flags: [u32; 2],
    label: nerve_msgs::FixedStr<16>,
    blob: Blob,
    id: i16,
    kind: u8,
    reserved: u8,
    twist: nerve_msgs::Twist,
}

#[test]
fn nerve_message_gives_the_rust_schema_once_sealed() {
    let source = r#"
#include <nerve/message.hpp>
#include <nerve/msgs/header.hpp>
#include <nerve/msgs/twist.hpp>
#include <iostream>

namespace my_pkg {
struct Pose2D {
  double x;
  double y;
  double theta;
};
struct Corner {
  float x, y;
};
enum class Kind : std::uint8_t { a, b };
struct Scene {
  nerve::msgs::Header header;
  Pose2D pose;
  std::array<Corner, 4> corners;
  std::uint32_t flags[2];
  nerve::FixedStr<16> label;
  nerve::Opaque<12, 4, 0x0123456789abcdefULL> blob;
  short id;
  Kind kind;
  std::uint8_t reserved;
  nerve::msgs::Twist twist;
};
}  // namespace my_pkg

NERVE_MESSAGE(my_pkg::Pose2D, "my_pkg/Pose2D", x, y, theta);
NERVE_STRUCT(::my_pkg::Corner, x, y);
NERVE_MESSAGE(my_pkg::Scene, "my_pkg/Scene", header, pose, corners, flags, label, blob, id,
              kind, reserved, twist);

template <class T>
void print() {
  static_assert(!nerve::message_traits<T>::sealed);
  std::cout << nerve::message_traits<T>::type_name << '\t' << nerve::schema_text_of<T>()
            << '\n';
}

int main() {
  print<my_pkg::Pose2D>();
  print<my_pkg::Scene>();
}
"#;
    let Some(lines) = run_cpp("nerve_message", source) else {
        return;
    };
    let rust = [Schema::of::<Pose2D>(), Schema::of::<Scene>()];
    assert_eq!(lines.len(), rust.len(), "{lines:?}");
    for ((name, text), rust) in lines.iter().zip(&rust) {
        assert_eq!(name, &rust.name);
        assert!(
            text.contains(&format!("|hash={}|", codegen::UNSEALED_HASH)),
            "{text}"
        );
        // unsealed, the schema refuses its hash and names the one its layout has
        match Schema::decode(text) {
            Err(SchemaError::HashMismatch { computed, .. }) => {
                assert_eq!(computed, rust.layout_hash, "{name}")
            }
            other => panic!("{name}: {other:?}"),
        }
        let sealed = codegen::seal(text).unwrap();
        assert_eq!(sealed.layout_hash, rust.layout_hash, "{name}");
        assert_eq!(&sealed, rust, "{name}");
        assert_eq!(
            sealed.encode(),
            rust.encode(),
            "{name}: the very text Rust writes"
        );
    }
}

/// The macro machinery reads generated types through their `struct_traits`: for every
/// built-in message it rebuilds the schema text the header holds.
#[test]
fn struct_traits_of_generated_types_rebuild_their_schemas() {
    let headers = codegen::builtin_headers().unwrap();
    let mut source = String::from("#include <nerve/message.hpp>\n#include <iostream>\n");
    let mut body = String::new();
    let mut expected = Vec::new();
    for schema in nerve_msgs::schemas() {
        if schema.head.size() == 0 {
            continue; // an empty struct has no struct_traits: C++ gives it a byte
        }
        let short = schema.name.rsplit('/').next().unwrap();
        let path = format!("nerve/msgs/{}.hpp", codegen::snake_case(short));
        assert!(headers.iter().any(|(p, _)| p == Path::new(&path)));
        source.push_str(&format!("#include <{path}>\n"));
        body.push_str(&format!(
            "  std::cout << \"{0}\\t\" << nerve::unsealed_schema_text<nerve::msgs::{1}>() \
             << '\\n';\n  static_assert(nerve::schema_text_of<nerve::msgs::{1}>().size() > 0);\n",
            schema.name, short
        ));
        expected.push(schema);
    }
    source.push_str(&format!("int main() {{\n{body}}}\n"));
    let Some(lines) = run_cpp("struct_traits", &source) else {
        return;
    };
    assert_eq!(lines.len(), expected.len());
    for ((name, text), schema) in lines.iter().zip(&expected) {
        assert_eq!(name, &schema.name);
        assert_eq!(codegen::seal(text).as_ref(), Ok(schema), "{name}: {text}");
    }
}

/// The schema texts survive the C++ compiler: quotes, backslashes, trigraph look-alikes
/// and UTF-8 of a foreign (ROS 2) definition too, and the literal's pieces join to the
/// exact text.
#[test]
fn schema_literals_read_back_exactly() {
    let foreign = nerve_msgs::ros2::ros2_schema(
        "std_msgs/msg/String",
        "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18",
        "# \"quoted\" \\ ??= é\nstring data \"hi\"\n",
    );
    let mut schemas = nerve_msgs::schemas();
    schemas.push(foreign);
    let headers = codegen::cpp_headers(&schemas, &[], &[]).unwrap();
    assert!(headers
        .iter()
        .any(|(p, _)| p == Path::new("std_msgs/msg/string.hpp")));
    let mut source = String::from("#include <iostream>\n");
    let mut body = String::new();
    for schema in &schemas {
        let mut parts: Vec<&str> = schema.name.split('/').collect();
        let short = parts.pop().unwrap();
        let ns = if parts == ["nerve_msgs"] {
            "nerve::msgs".to_string()
        } else {
            parts.join("::")
        };
        let dir = ns.replace("::", "/");
        source.push_str(&format!(
            "#include <{dir}/{}.hpp>\n",
            codegen::snake_case(short)
        ));
        body.push_str(&format!(
            "  std::cout << \"{}\\t\" << nerve::message_traits<{ns}::{short}>::schema_text \
             << '\\n';\n",
            schema.name
        ));
    }
    source.push_str(&format!("int main() {{\n{body}}}\n"));
    if !have_gxx("schema_literals_read_back_exactly") {
        return;
    }
    let dir = scratch("literal-headers");
    write_headers(&dir, &headers);
    let Some(lines) = run_cpp_in("literals", &source, &[&dir]) else {
        return;
    };
    let _ = std::fs::remove_dir_all(dir);
    assert_eq!(lines.len(), schemas.len());
    for ((name, text), schema) in lines.iter().zip(&schemas) {
        assert_eq!(name, &schema.name);
        assert_eq!(*text, schema.encode(), "{name}");
    }
}

// --- C ----------------------------------------------------------------------------------

/// The flags every C check compiles with: strict C11, every warning an error.
const C_FLAGS: [&str; 5] = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"];

/// A C compiler (`$CC`, else `cc`, `gcc` or `clang`); None, saying why the test is
/// skipped, when there is none, unless `NERVE_REQUIRE_CPP=1` makes that a failure.
fn c_compiler(test: &str) -> Option<String> {
    let from_env = std::env::var("CC").ok().filter(|c| !c.trim().is_empty());
    let candidates = from_env
        .into_iter()
        .chain(["cc", "gcc", "clang"].map(String::from));
    for cc in candidates {
        let found = Command::new(&cc)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if found {
            return Some(cc);
        }
    }
    assert!(
        std::env::var_os("NERVE_REQUIRE_CPP").is_none_or(|v| v != "1"),
        "{test}: no C compiler (cc, gcc or clang), and NERVE_REQUIRE_CPP=1 requires one"
    );
    eprintln!("{test}: skipped: no C compiler (cc, gcc or clang) is installed");
    None
}

/// Compiles C `source` (syntax only) with [`C_FLAGS`] and the include directories;
/// panics with the compiler's output when it fails.
fn cc_check(cc: &str, source: &str, includes: &[&Path], what: &str) {
    let mut cmd = Command::new(cc);
    cmd.args(C_FLAGS).arg("-fsyntax-only");
    for i in includes {
        cmd.arg("-I").arg(i);
    }
    let mut child = cmd
        .args(["-x", "c", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the C compiler");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(source.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{cc} {} refuses {what}:\n{}",
        C_FLAGS.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds C `source` with [`C_FLAGS`] and the include directories, runs it and returns
/// what it printed; panics when it does not build or fails.
fn run_c(cc: &str, name: &str, source: &str, includes: &[&Path]) -> String {
    let dir = scratch(name);
    let src = dir.join("main.c");
    let exe = dir.join("main");
    std::fs::write(&src, source).unwrap();
    let mut cmd = Command::new(cc);
    cmd.args(C_FLAGS);
    for i in includes {
        cmd.arg("-I").arg(i);
    }
    let out = cmd.arg(&src).arg("-o").arg(&exe).output().unwrap();
    assert!(
        out.status.success(),
        "{cc} refuses the {name} program:\n{}\n{source}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    assert!(
        out.status.success(),
        "the {name} program fails:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(dir);
    String::from_utf8(out.stdout).unwrap()
}

/// `s` as a C string literal (what the tests compare with).
fn c_literal(s: &str) -> String {
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'?' => out.push_str("\\?"),
            b' '..=b'~' => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}

/// The C macro prefix and header of message or service type `pkg/Name`.
fn c_names(type_name: &str) -> (String, String) {
    let mut parts: Vec<&str> = type_name.split('/').collect();
    let short = parts.pop().unwrap();
    let dir = if parts == ["nerve_msgs"] {
        "nerve/msgs".to_string()
    } else {
        parts.join("/")
    };
    let prefix = format!("{}_{}", dir.replace('/', "_"), codegen::snake_case(short));
    (
        prefix.to_ascii_uppercase(),
        format!("{dir}/{}.h", codegen::snake_case(short)),
    )
}

#[test]
fn builtin_c_headers_cover_every_type_once() {
    let headers = codegen::builtin_c_headers().unwrap();
    let paths: Vec<&Path> = headers.iter().map(|(p, _)| p.as_path()).collect();
    assert!(
        paths.windows(2).all(|w| w[0] < w[1]),
        "sorted by path, once"
    );
    // a .h beside every .hpp
    let cpp: Vec<PathBuf> = codegen::builtin_headers()
        .unwrap()
        .into_iter()
        .map(|(p, _)| p.with_extension("h"))
        .collect();
    assert_eq!(paths, cpp.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    let text = |p: &str| {
        &headers
            .iter()
            .find(|(q, _)| q == Path::new(p))
            .unwrap_or_else(|| panic!("{p}"))
            .1
    };
    let imu = text("nerve/msgs/imu.h");
    assert!(
        imu.starts_with("/* generated by `nerve types gen-c` from schema nerve_msgs/Imu"),
        "{imu}"
    );
    assert!(imu.contains("do not edit"));
    for needle in [
        "#pragma once\n",
        "#include <stddef.h>\n#include <stdint.h>\n",
        "#include <nerve/msgs/time.h>\n",
        "typedef struct nerve_msgs_Imu {\n  nerve_msgs_Time stamp;\n",
        "  double orientation_covariance[9];\n",
        "} nerve_msgs_Imu;\n",
        "_Static_assert(sizeof(nerve_msgs_Imu) == 304, ",
        "_Static_assert(_Alignof(nerve_msgs_Imu) == 8, ",
        "_Static_assert(offsetof(nerve_msgs_Imu, linear_acceleration_covariance) == 232, ",
        "#define NERVE_MSGS_IMU_TYPE_NAME \"nerve_msgs/Imu\"\n",
        "#define NERVE_MSGS_IMU_HEAD_SIZE 304\n",
        "#define NERVE_MSGS_IMU_ELEMS_OFFSET 304\n",
        "#define NERVE_MSGS_IMU_SCHEMA \\\n  \"nerve-schema/1|type=nerve_msgs/Imu|",
    ] {
        assert!(imu.contains(needle), "{needle:?} in\n{imu}");
    }
    let hash = nerve::TypeInfo::of::<nerve_msgs::Imu>().layout_hash;
    assert!(
        imu.contains(&format!(
            "#define NERVE_MSGS_IMU_LAYOUT_HASH UINT64_C(0x{hash:016x})\n"
        )),
        "{imu}"
    );
    assert!(!imu.contains("ELEM_SIZE"), "no slice: {imu}");
    // a nested struct: its own header, included where it is used, defined once
    let odometry = text("nerve/msgs/odometry.h");
    assert!(odometry.contains("#include <nerve/msgs/header.h>"));
    assert!(
        odometry.contains("  char child_frame_id[64]; /* FixedStr<64>: UTF-8 text, NUL-padded */"),
        "{odometry}"
    );
    let definitions = headers
        .iter()
        .filter(|(_, t)| t.contains("typedef struct nerve_msgs_Header {"))
        .count();
    assert_eq!(definitions, 1, "Header is defined once");
    let cloud = text("nerve/msgs/point_cloud.h");
    for needle in [
        "  nerve_msgs_PointField fields[12];\n",
        "typedef uint8_t nerve_msgs_PointCloud_elem;\n",
        "#define NERVE_MSGS_POINT_CLOUD_ELEM_SIZE 1\n",
        "#define NERVE_MSGS_POINT_CLOUD_ELEMS_OFFSET 432\n",
    ] {
        assert!(cloud.contains(needle), "{needle:?} in\n{cloud}");
    }
    let scan = text("nerve/msgs/laser_scan.h");
    assert!(scan.contains("typedef float nerve_msgs_LaserScan_elem;"));
    // the empty message: no struct in C, only its macros
    let empty = text("nerve/msgs/empty.h");
    assert!(!empty.contains("typedef"), "{empty}");
    assert!(empty.contains("C has no empty struct"), "{empty}");
    assert!(empty.contains("#define NERVE_MSGS_EMPTY_HEAD_SIZE 0\n"));
    assert!(empty.contains("#define NERVE_MSGS_EMPTY_SCHEMA"));
    // a service: its type for nerve_client_create / nerve_server_create
    let add = text("nerve/msgs/add_two_ints.h");
    for needle in [
        "#include <nerve/msgs/int.h>\n#include <nerve/msgs/two_ints.h>\n",
        "#define NERVE_MSGS_ADD_TWO_INTS_TYPE_NAME \"nerve_msgs/AddTwoInts\"\n",
        "#define NERVE_MSGS_ADD_TWO_INTS_SERVICE_TYPE_INIT \\\n",
        "    .request_schema = NERVE_MSGS_TWO_INTS_SCHEMA, \\\n",
        "    .response_hash = NERVE_MSGS_INT_LAYOUT_HASH, \\\n",
    ] {
        assert!(add.contains(needle), "{needle:?} in\n{add}");
    }
    // an action: its name and its messages
    let fib = text("nerve/msgs/fibonacci.h");
    for needle in [
        "#include <nerve/msgs/fibonacci_goal.h>\n#include <nerve/msgs/fibonacci_sequence.h>\n",
        "#define NERVE_MSGS_FIBONACCI_TYPE_NAME \"nerve_msgs/Fibonacci\"\n",
        " *   goal     nerve_msgs/FibonacciGoal (NERVE_MSGS_FIBONACCI_GOAL_*)\n",
    ] {
        assert!(fib.contains(needle), "{needle:?} in\n{fib}");
    }
    assert_eq!(
        codegen::builtin_c_headers().unwrap(),
        headers,
        "deterministic"
    );
}

#[test]
fn generated_c_headers_compile() {
    let Some(cc) = c_compiler("generated_c_headers_compile") else {
        return;
    };
    let include = include_dir();
    let headers = codegen::builtin_c_headers().unwrap();
    // each header on its own (it includes what it needs), a few at a time
    let jobs: Vec<&PathBuf> = headers.iter().map(|(p, _)| p).collect();
    std::thread::scope(|s| {
        for chunk in jobs.chunks(jobs.len().div_ceil(4)) {
            let (include, cc) = (&include, &cc);
            s.spawn(move || {
                for p in chunk {
                    let src = format!("#include <{}>\n", p.display());
                    cc_check(cc, &src, &[include], &p.display().to_string());
                }
            });
        }
    });
    // all of them together, each twice, after nerve.h, with every service's type
    let mut all = String::from("#include <nerve.h>\n");
    for _ in 0..2 {
        for p in &jobs {
            all.push_str(&format!("#include <{}>\n", p.display()));
        }
    }
    for schema in nerve_msgs::schemas() {
        let (prefix, _) = c_names(&schema.name);
        all.push_str(&format!(
            "_Static_assert({prefix}_LAYOUT_HASH == UINT64_C(0x{:016x}), \"{prefix}\");\n",
            schema.layout_hash
        ));
        if schema.head.size() > 0 {
            let c_type = schema.name.replace('/', "_");
            all.push_str(&format!(
                "_Static_assert(sizeof({c_type}) == {prefix}_HEAD_SIZE, \"{c_type}\");\n"
            ));
        }
    }
    all.push_str("const nerve_service_type_t services[] = {\n");
    for s in nerve_msgs::srv::services() {
        all.push_str(&format!("  {}_SERVICE_TYPE_INIT,\n", c_names(s.name).0));
    }
    all.push_str("};\nconst char *const actions[] = {\n");
    for a in nerve_msgs::action::actions() {
        all.push_str(&format!("  {}_TYPE_NAME,\n", c_names(a.name).0));
    }
    all.push_str("};\n");
    cc_check(&cc, &all, &[&include], "all the C headers together");
}

/// The macros of the C headers hold the exact schema texts: every built-in type's, and
/// a foreign (ROS 2) definition with quotes, backslashes, trigraph look-alikes and UTF-8;
/// a service's type initializer carries its messages' schemas and hashes.
#[test]
fn c_schema_macros_read_back_exactly() {
    let foreign = nerve_msgs::ros2::ros2_schema(
        "std_msgs/msg/String",
        "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18",
        "# \"quoted\" \\ ??= é */ /*\nstring data \"hi\"\n",
    );
    let mut schemas = nerve_msgs::schemas();
    schemas.push(foreign);
    let services: Vec<ServiceDef> = nerve_msgs::srv::services()
        .into_iter()
        .map(|s| ServiceDef {
            name: s.name.into(),
            request: s.request.into(),
            response: s.response.into(),
        })
        .collect();
    let headers = codegen::c_headers(&schemas, &services, &[]).unwrap();
    let string_h = &headers
        .iter()
        .find(|(p, _)| p == Path::new("std_msgs/msg/string.h"))
        .expect("std_msgs/msg/string.h")
        .1;
    assert!(string_h.contains("#define STD_MSGS_MSG_STRING_SCHEMA"));
    let Some(cc) = c_compiler("c_schema_macros_read_back_exactly") else {
        return;
    };
    let mut source =
        String::from("#include <nerve.h>\n#include <inttypes.h>\n#include <stdio.h>\n");
    let mut body = String::new();
    for schema in &schemas {
        let (prefix, header) = c_names(&schema.name);
        source.push_str(&format!("#include <{header}>\n"));
        body.push_str(&format!(
            "  printf(\"%s\\t%016\" PRIx64 \"\\t%s\\n\", {prefix}_TYPE_NAME, {prefix}_LAYOUT_HASH, \
             {prefix}_SCHEMA);\n"
        ));
    }
    for s in &services {
        let (prefix, header) = c_names(&s.name);
        source.push_str(&format!("#include <{header}>\n"));
        body.push_str(&format!(
            "  {{\n    nerve_service_type_t ty = {prefix}_SERVICE_TYPE_INIT;\n    \
             printf(\"%s\\t%016\" PRIx64 \"\\t%s\\n\", ty.type_name, ty.request_hash, \
             ty.request_schema);\n    printf(\"%s\\t%016\" PRIx64 \"\\t%s\\n\", ty.type_name, \
             ty.response_hash, ty.response_schema);\n    if (ty.max_payload != 0) return 1;\n  }}\n"
        ));
    }
    source.push_str(&format!("int main(void) {{\n{body}  return 0;\n}}\n"));
    let dir = scratch("c-literal-headers");
    write_headers(&dir, &headers);
    let out = run_c(&cc, "c-literals", &source, &[&dir, &include_dir()]);
    let _ = std::fs::remove_dir_all(dir);
    let lines: Vec<Vec<&str>> = out.lines().map(|l| l.splitn(3, '\t').collect()).collect();
    let by_name = |n: &str| schemas.iter().find(|s| s.name == n).unwrap();
    let mut expected: Vec<(String, &Schema)> =
        schemas.iter().map(|s| (s.name.clone(), s)).collect();
    for s in &services {
        expected.push((s.name.clone(), by_name(&s.request)));
        expected.push((s.name.clone(), by_name(&s.response)));
    }
    assert_eq!(lines.len(), expected.len(), "{out}");
    for (line, (name, schema)) in lines.iter().zip(&expected) {
        assert_eq!(line[0], name);
        assert_eq!(line[1], format!("{:016x}", schema.layout_hash), "{name}");
        assert_eq!(line[2], schema.encode(), "{name}");
    }
}

/// A user message with a nested struct (itself nesting a fixed string), an array of
/// arrays, a fixed string, an array of structs, a hand-written type and a slice of
/// structs: what C makes of it has Rust's layout, checked by the compiler and at run time.
#[derive(Clone, Copy, nerve::Message)]
#[repr(C)]
#[message(name = "my_pkg/Grid", elem = Corner)]
struct Grid {
    header: nerve_msgs::Header,
    pose: Pose2D,
    corners: [Corner; 2],
    blob: Blob,
    cells: [[u16; 3]; 2],
    name: nerve_msgs::FixedStr<10>,
    kind: u8,
    flags: [u8; 5],
}

/// A struct aligned beyond its fields.
#[derive(Clone, Copy, nerve::Pod)]
#[repr(C, align(8))]
struct Wide {
    a: [f32; 2],
}

#[derive(Clone, Copy, nerve::Message)]
#[repr(C)]
#[message(name = "my_pkg/Tiles")]
struct Tiles {
    wide: [Wide; 2],
    names: [nerve_msgs::FixedStr<4>; 2],
}

#[test]
fn a_user_schema_in_c_has_the_rust_layout() {
    let schemas = [
        Schema::of::<Pose2D>(),
        Schema::of::<Grid>(),
        Schema::of::<Tiles>(),
    ];
    let headers = codegen::c_headers(&schemas, &[], &[]).unwrap();
    let paths: Vec<String> = headers
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    assert_eq!(
        paths,
        [
            "my_pkg/corner.h",
            "my_pkg/grid.h",
            "my_pkg/pose2_d.h",
            "my_pkg/tiles.h",
            "my_pkg/wide.h",
        ]
    );
    let grid = &headers[1].1;
    for needle in [
        "#include <nerve/msgs/header.h>\n",
        "#include <my_pkg/pose2_d.h>\n",
        "  nerve_msgs_Header header;\n",
        "  my_pkg_Pose2D pose;\n",
        "  uint16_t cells[2][3];\n",
        "  char name[10]; /* FixedStr<10>",
        "  my_pkg_Corner corners[2];\n",
        "  _Alignas(4) uint8_t blob[12]; /* a hand-written plain-data type (layout hash \
         0123456789abcdef) */\n",
        "typedef my_pkg_Corner my_pkg_Grid_elem;\n",
        "#define MY_PKG_GRID_ELEM_SIZE 8\n",
    ] {
        assert!(grid.contains(needle), "{needle:?} in\n{grid}");
    }
    let wide = &headers[4].1;
    assert!(
        wide.contains("typedef struct my_pkg_Wide {\n  _Alignas(8) float a[2];\n}"),
        "{wide}"
    );
    let Some(cc) = c_compiler("a_user_schema_in_c_has_the_rust_layout") else {
        return;
    };
    let dir = scratch("c-user");
    write_headers(&dir, &headers);
    for (p, _) in &headers {
        let src = format!("#include <{}>\n", p.display());
        cc_check(&cc, &src, &[&dir, &include_dir()], &p.display().to_string());
    }
    // at run time: sizes, alignments and offsets as Rust has them, the macros as the
    // schema says, and the bytes of a message written in C as Rust writes them
    let mut checks = String::new();
    for schema in &schemas {
        let (prefix, _) = c_names(&schema.name);
        let c_type = schema.name.replace('/', "_");
        let Shape::Struct(head) = &schema.head else {
            unreachable!()
        };
        checks.push_str(&format!(
            "  CHECK(sizeof({c_type}) == {});\n  CHECK(_Alignof({c_type}) == {});\n  \
             CHECK({prefix}_HEAD_SIZE == {});\n  CHECK({prefix}_LAYOUT_HASH == \
             UINT64_C(0x{:016x}));\n  CHECK(strcmp({prefix}_SCHEMA, {}) == 0);\n  \
             CHECK(strcmp({prefix}_TYPE_NAME, \"{}\") == 0);\n",
            head.size,
            head.align,
            head.size,
            schema.layout_hash,
            c_literal(&schema.encode()),
            schema.name
        ));
        for f in &head.fields {
            checks.push_str(&format!(
                "  CHECK(offsetof({c_type}, {}) == {});\n",
                f.name, f.offset
            ));
        }
    }
    checks.push_str(&format!(
        "  CHECK(MY_PKG_GRID_ELEM_SIZE == sizeof(my_pkg_Grid_elem));\n  \
         CHECK(MY_PKG_GRID_ELEMS_OFFSET == {});\n",
        nerve::message::elems_offset::<Grid>()
    ));
    let source = format!(
        r#"#include <my_pkg/grid.h>
#include <my_pkg/tiles.h>
#include <stdio.h>
#include <string.h>

#define CHECK(c) do {{ if (!(c)) {{ fprintf(stderr, "check failed: %s\n", #c); return 1; }} }} while (0)

int main(void) {{
  my_pkg_Grid g;
  const unsigned char *p = (const unsigned char *)&g;
  size_t i;
{checks}  memset(&g, 0, sizeof g);
  g.header.stamp.nanos = -5;
  memcpy(g.header.frame_id, "map", 3);
  g.pose.theta = 0.5;
  g.cells[1][2] = 7;
  memcpy(g.name, "grid", 4);
  g.corners[1].y = 2.5f;
  g.blob[11] = 0xab;
  g.kind = 3;
  g.flags[2] = 9;
  for (i = 0; i < sizeof g; ++i) printf("%02x", p[i]);
  printf("\n");
  return 0;
}}
"#
    );
    let out = run_c(&cc, "c-user-layout", &source, &[&dir, &include_dir()]);
    let _ = std::fs::remove_dir_all(dir);
    let mut g = Grid {
        header: nerve_msgs::Header::default(),
        pose: Pose2D {
            x: 0.0,
            y: 0.0,
            theta: 0.5,
        },
        corners: [Corner { x: 0.0, y: 0.0 }, Corner { x: 0.0, y: 2.5 }],
        blob: Blob([0; 12]),
        cells: [[0; 3], [0, 0, 7]],
        name: nerve_msgs::FixedStr::new("grid").unwrap(),
        kind: 3,
        flags: [0, 0, 9, 0, 0],
    };
    g.header.stamp.nanos = -5;
    g.header.frame_id = nerve_msgs::FixedStr::new("map").unwrap();
    g.blob.0[11] = 0xab;
    let rust: String = nerve::message::as_bytes(&g)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        out.trim(),
        rust,
        "the bytes C writes are the bytes Rust writes"
    );
}

#[test]
fn what_c_cannot_name_or_express_is_refused_by_name() {
    let gen = |schemas: &[Schema]| codegen::c_headers(schemas, &[], &[]);
    // a C keyword as a field: fine in C++, refused in C
    let restrict = schema_of("pkg/P", point("P", &["x", "restrict"]));
    codegen::cpp_headers(std::slice::from_ref(&restrict), &[], &[]).unwrap();
    let e = gen(std::slice::from_ref(&restrict)).unwrap_err();
    assert!(
        matches!(&e, CodegenError::BadName { name, lang: Lang::C, .. } if name == "restrict"),
        "{e}"
    );
    assert!(
        e.to_string().contains("cannot be a C name: a C keyword"),
        "{e}"
    );
    // the C++ rules hold too
    let e = gen(&[schema_of("pkg/P", point("P", &["x", "new"]))]).unwrap_err();
    assert!(matches!(e, CodegenError::BadName { .. }), "{e}");
    let e = gen(&[schema_of("pkg/class", point("P", &["x"]))]).unwrap_err();
    assert!(matches!(e, CodegenError::BadName { .. }), "{e}");
    // a C name starting with `_` is reserved
    let e = gen(&[schema_of("_pkg/P", point("P", &["x"]))]).unwrap_err();
    assert!(matches!(e, CodegenError::BadName { .. }), "{e}");
    // two types of one C name
    let e = gen(&[
        schema_of("my_pkg/Foo", point("Foo", &["x"])),
        schema_of("my/pkg_Foo", point("pkg_Foo", &["x"])),
    ])
    .unwrap_err();
    assert!(
        matches!(&e, CodegenError::Conflict { name, .. } if name == "my_pkg_Foo"),
        "{e}"
    );
    // a type named as another's macro
    let e = gen(&[
        schema_of("PKG/A", point("A", &["x"])),
        schema_of("PKG/A_TYPE_NAME", point("A_TYPE_NAME", &["x"])),
    ])
    .unwrap_err();
    assert!(
        matches!(&e, CodegenError::Conflict { name, .. } if name == "PKG_A_TYPE_NAME"),
        "{e}"
    );
    // a field named as a macro would be replaced by it
    let e = gen(&[schema_of("pkg/P", point("P", &["PKG_P_HEAD_SIZE"]))]).unwrap_err();
    assert!(
        matches!(&e, CodegenError::BadName { name, .. } if name == "PKG_P_HEAD_SIZE"),
        "{e}"
    );
    // header paths, in C too
    let e = gen(&[
        schema_of("pkg/PoseA", point("PoseA", &["x"])),
        schema_of("pkg/Pose_A", point("Pose_A", &["x"])),
    ])
    .unwrap_err();
    assert!(
        matches!(&e, CodegenError::PathCollision { path, .. } if path.extension().is_some_and(|x| x == "h")),
        "{e}"
    );
    // layouts C cannot express: a zero-length array, an empty struct (a 128-bit integer,
    // aligned beyond what a schema allows here, is refused before)
    let mut zero = point("Zero", &["z", "x"]);
    zero.fields[0].shape = Shape::Array {
        elem: Box::new(Shape::Prim(Prim::F64)),
        len: 0,
    };
    zero.fields[1].offset = 0;
    zero.size = 8;
    let mut empty = point("Hollow", &["e", "x"]);
    empty.fields[0].shape = Shape::Struct(StructShape {
        name: "Nothing".into(),
        size: 0,
        align: 1,
        fields: vec![],
    });
    empty.fields[1].offset = 0;
    empty.size = 8;
    for s in [zero, empty] {
        let name = s.name.clone();
        let schema = schema_of(&format!("pkg/{name}"), s);
        Schema::decode(&schema.encode()).expect("a layout Rust accepts");
        let e = gen(&[schema]).unwrap_err();
        assert!(
            matches!(e, CodegenError::Unrepresentable { lang: Lang::C, .. }),
            "{name}: {e}"
        );
        assert!(e.to_string().contains("cannot be expressed in C:"), "{e}");
    }
}
