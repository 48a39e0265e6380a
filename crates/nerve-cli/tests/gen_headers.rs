//! `nerve types gen-cpp` and `nerve types gen-c`: the built-in headers (the very files
//! checked in under crates/nerve-c/include), headers from schema files and from a live
//! topic, and one-line errors naming the file at fault.

use nerve::prelude::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const DOMAIN: u32 = 993;

fn state_dir() -> PathBuf {
    std::env::temp_dir().join("nerve-cli-gen-cpp-test/")
}

/// A fresh scratch directory.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nerve-gen-cpp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn nerve(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nerve"))
        .args(args)
        .env("NERVE_DOMAIN", DOMAIN.to_string())
        .env("NERVE_STATE_DIR", state_dir())
        .env_remove("NERVE_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("run nerve")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A type that exists only in this test binary.
#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "test_gen/Pose2D")]
struct Pose2D {
    x: f64,
    y: f64,
    theta: f64,
}

#[test]
fn builtin_headers_are_the_checked_in_ones() {
    let dir = scratch("builtin");
    let out = stdout(&nerve(&[
        "types",
        "gen-cpp",
        "--out",
        dir.to_str().unwrap(),
    ]));
    let imu = dir.join("nerve/msgs/imu.hpp");
    assert!(out.contains(&format!("wrote {}", imu.display())), "{out}");
    let checked_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("../nerve-c/include");
    for (rel, _) in nerve_c::codegen::builtin_headers().unwrap() {
        let ours = std::fs::read_to_string(dir.join(&rel)).unwrap();
        let theirs = std::fs::read_to_string(checked_in.join(&rel)).unwrap_or_default();
        assert_eq!(ours, theirs, "{}", rel.display());
    }
    // again: nothing to write
    let again = stdout(&nerve(&[
        "types",
        "gen-cpp",
        "--out",
        dir.to_str().unwrap(),
    ]));
    assert!(again.contains("(0 written)"), "{again}");
    assert!(
        again.contains(&format!("unchanged {}", imu.display())),
        "{again}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn builtin_c_headers_are_the_checked_in_ones() {
    let dir = scratch("builtin-c");
    let out = stdout(&nerve(&["types", "gen-c", "--out", dir.to_str().unwrap()]));
    let imu = dir.join("nerve/msgs/imu.h");
    assert!(out.contains(&format!("wrote {}", imu.display())), "{out}");
    let checked_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("../nerve-c/include");
    let headers = nerve_c::codegen::builtin_c_headers().unwrap();
    assert!(
        out.contains(&format!("{} headers in", headers.len())),
        "{out}"
    );
    for (rel, _) in &headers {
        assert_eq!(rel.extension().unwrap(), "h", "{}", rel.display());
        let ours = std::fs::read_to_string(dir.join(rel)).unwrap();
        let theirs = std::fs::read_to_string(checked_in.join(rel)).unwrap_or_default();
        assert_eq!(ours, theirs, "{}", rel.display());
    }
    assert!(!dir.join("nerve/msgs/imu.hpp").exists(), "C only: {out}");
    // again: nothing to write
    let again = stdout(&nerve(&["types", "gen-c", "--out", dir.to_str().unwrap()]));
    assert!(again.contains("(0 written)"), "{again}");
    assert!(
        again.contains(&format!("unchanged {}", imu.display())),
        "{again}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn gen_c_writes_schema_files_and_names_what_is_wrong() {
    let dir = scratch("files-c");
    let schema = nerve::message::schema::Schema::of::<Pose2D>();
    let good = dir.join("pose.schema");
    std::fs::write(&good, format!("{}\n", schema.encode())).unwrap();
    let out_dir = dir.join("include");
    let args = |file: &Path| {
        vec![
            "types".to_string(),
            "gen-c".into(),
            "--out".into(),
            out_dir.display().to_string(),
            "--schema".into(),
            file.display().to_string(),
        ]
    };
    let run = |file: &Path| {
        let args = args(file);
        nerve(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let out = stdout(&run(&good));
    let path = out_dir.join("test_gen/pose2_d.h");
    assert!(out.contains(&format!("wrote {}", path.display())), "{out}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("typedef struct test_gen_Pose2D {\n  double x;"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "#define TEST_GEN_POSE2_D_LAYOUT_HASH UINT64_C(0x{:016x})",
            schema.layout_hash
        )),
        "{text}"
    );
    assert!(!out_dir.join("nerve").exists(), "only the selected types");
    let again = stdout(&run(&good));
    assert!(
        again.contains(&format!("unchanged {}", path.display())) && again.contains("(0 written)"),
        "{again}"
    );

    let hash = format!("hash={:016x}", schema.layout_hash);
    let two_lines = dir.join("two.schema");
    std::fs::write(&two_lines, format!("{0}\n{0}\n", schema.encode())).unwrap();
    let lie = dir.join("lie.schema");
    std::fs::write(
        &lie,
        schema.encode().replace(&hash, "hash=0000000000000001"),
    )
    .unwrap();
    // a C keyword as a field name (unsealed: the layout gives the hash)
    let keyword = dir.join("keyword.schema");
    std::fs::write(
        &keyword,
        schema
            .encode()
            .replace(&hash, "hash=0000000000000000")
            .replace("theta:", "restrict:"),
    )
    .unwrap();
    let missing = dir.join("missing.schema");
    for (file, code, needle) in [
        (&two_lines, 2, "expected one nerve-schema/1 line, found 2"),
        (&lie, 2, "does not match its layout hash"),
        (&keyword, 1, "\"restrict\" cannot be a C name: a C keyword"),
        (&missing, 1, "reading schema file"),
    ] {
        let out = run(file);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{}: {err}", file.display());
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains(needle), "{}: {err}", file.display());
        if code == 2 || needle.contains("reading") {
            assert!(err.contains(&file.display().to_string()), "{err}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn schema_files_generate_their_types_and_name_what_is_wrong() {
    let dir = scratch("files");
    let schema = nerve::message::schema::Schema::of::<Pose2D>();
    let good = dir.join("pose.schema");
    std::fs::write(&good, format!("{}\n", schema.encode())).unwrap();
    // unsealed, as NERVE_MESSAGE writes it: the layout gives the hash
    let unsealed = dir.join("unsealed.schema");
    let hash = format!("hash={:016x}", schema.layout_hash);
    std::fs::write(
        &unsealed,
        schema
            .encode()
            .replace(&hash, "hash=0000000000000000")
            .replace("test_gen/Pose2D", "test_gen/Pose"),
    )
    .unwrap();
    let out_dir = dir.join("include");
    let out = stdout(&nerve(&[
        "types",
        "gen-cpp",
        "--out",
        out_dir.to_str().unwrap(),
        "--schema",
        good.to_str().unwrap(),
        "--schema",
        unsealed.to_str().unwrap(),
    ]));
    assert!(
        out.contains("pose2_d.hpp") && out.contains("pose.hpp"),
        "{out}"
    );
    let pose = std::fs::read_to_string(out_dir.join("test_gen/pose2_d.hpp")).unwrap();
    assert!(pose.contains(&format!("layout_hash = 0x{:016x}ULL", schema.layout_hash)));
    assert!(
        !out_dir.join("nerve").exists(),
        "only the selected types: {out}"
    );

    let two_lines = dir.join("two.schema");
    std::fs::write(&two_lines, format!("{0}\n{0}\n", schema.encode())).unwrap();
    let lie = dir.join("lie.schema");
    std::fs::write(
        &lie,
        schema.encode().replace(&hash, "hash=0000000000000001"),
    )
    .unwrap();
    let unknown = dir.join("unknown.schema");
    std::fs::write(
        &unknown,
        "nerve-schema/1|type=test_gen/P|hash=0000000000000000|head=P|elem=-|struct P 8 8 a:0:Q",
    )
    .unwrap();
    let bad_name = dir.join("bad_name.schema");
    std::fs::write(
        &bad_name,
        schema
            .encode()
            .replace(&hash, "hash=0000000000000000")
            .replace("test_gen/Pose2D", "test_gen/class"),
    )
    .unwrap();
    let missing = dir.join("missing.schema");
    for (file, code, needle) in [
        (&two_lines, 2, "expected one nerve-schema/1 line, found 2"),
        (&lie, 2, "does not match its layout hash"),
        (&unknown, 2, "unknown type \"Q\""),
        (&bad_name, 1, "cannot be a C++ name"),
        (&missing, 1, "reading schema file"),
    ] {
        let out = nerve(&[
            "types",
            "gen-cpp",
            "--out",
            out_dir.to_str().unwrap(),
            "--schema",
            file.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{}: {err}", file.display());
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains(needle), "{}: {err}", file.display());
        if code == 2 || needle.contains("reading") {
            assert!(err.contains(&file.display().to_string()), "{err}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_topic_gives_the_schema_it_records() {
    let ctx = Context::new(
        nerve::Config::default()
            .domain(DOMAIN)
            .unwrap()
            .state_dir(state_dir()),
    )
    .unwrap();
    let node = ctx.node("gen_cpp_test").create().unwrap();
    let _publisher = node.publisher::<Pose2D>("/gen/pose").create().unwrap();
    let dir = scratch("topic");
    let out = stdout(&nerve(&[
        "types",
        "gen-cpp",
        "--out",
        dir.to_str().unwrap(),
        "--topic",
        "/gen/pose",
    ]));
    let path = dir.join("test_gen/pose2_d.hpp");
    assert!(out.contains(&format!("wrote {}", path.display())), "{out}");
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains("struct Pose2D {\n  double x;"), "{text}");
    let out = nerve(&[
        "types",
        "gen-cpp",
        "--out",
        dir.to_str().unwrap(),
        "--topic",
        "/gen/nowhere",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("/gen/nowhere does not exist"), "{err}");
    // plain `nerve types` still lists
    let list = stdout(&nerve(&["types"]));
    assert!(list.contains("nerve_msgs/Imu"), "{list}");
    let _ = std::fs::remove_dir_all(dir);
}

/// ROS 2's test_msgs and the types they use (nerve-ros2-types' fixtures).
fn ros2_share() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../nerve-ros2-types/tests/fixtures/share")
}

#[test]
fn ros2_types_by_name_or_file_become_cdr_classes() {
    let share = ros2_share();
    let dir = scratch("ros2");
    let out = Command::new(env!("CARGO_BIN_EXE_nerve"))
        .args(["types", "gen-cpp", "--out", dir.to_str().unwrap()])
        .arg("test_msgs/msg/Nested")
        .arg(share.join("test_msgs/action/NestedMessage.action"))
        .env("AMENT_PREFIX_PATH", "")
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(text.contains("5 headers in"), "{text}");
    let nested = std::fs::read_to_string(dir.join("test_msgs/msg/nested.hpp")).unwrap();
    assert!(nested.contains("struct Nested {"), "{nested}");
    assert!(nested.contains("struct message_traits<::test_msgs::msg::Nested>"));
    assert!(nested.contains("\"RIHS01_"));
    let action = std::fs::read_to_string(dir.join("test_msgs/action/nested_message.hpp")).unwrap();
    assert!(
        action.contains("::nerve::msgs::Time nested_different_pkg{};"),
        "{action}"
    );
    assert!(!dir.join("builtin_interfaces/msg/time.hpp").exists());

    // a type found nowhere names where it was looked for; C is refused; a file named
    // otherwise than <pkg>/<kind>/<Name>.<kind> is refused
    let out = nerve(&[
        "types",
        "gen-cpp",
        "--out",
        dir.to_str().unwrap(),
        "nope_msgs/msg/Nope",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nope_msgs/msg/Nope"), "{err}");
    let out = nerve(&[
        "types",
        "gen-c",
        "--out",
        dir.to_str().unwrap(),
        "test_msgs/msg/Nested",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("C++ only"));
    let loose = dir.join("Loose.msg");
    std::fs::write(&loose, "int32 x\n").unwrap();
    let out = nerve(&[
        "types",
        "gen-cpp",
        "--out",
        dir.to_str().unwrap(),
        loose.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("<pkg>/<msg|srv|action>/<Name>"));
}
