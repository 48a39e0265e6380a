//! RIHS01 type hashes against the `.json` type descriptions rosidl installs.

mod common;

use std::path::{Path, PathBuf};

use nerve_ros2_types::{Registry, RegistryError, SearchPath, TypeDescription};

/// Every `<share>/<pkg>/{msg,srv,action}/*.json` under `share`.
fn json_files(share: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(pkgs) = std::fs::read_dir(share) else {
        return out;
    };
    for pkg in pkgs.flatten() {
        for kind in ["msg", "srv", "action"] {
            let Ok(files) = std::fs::read_dir(pkg.path().join(kind)) else {
                continue;
            };
            for f in files.flatten() {
                if f.path().extension().is_some_and(|e| e == "json") {
                    out.push(f.path());
                }
            }
        }
    }
    out.sort();
    out
}

struct Outcome {
    checked_files: usize,
    checked_hashes: usize,
    idl_only: Vec<String>,
}

/// Checks every JSON file: (1) re-hashing its own description gives its hash; (2) when the
/// `.msg`/`.srv`/`.action` source exists, loading it gives the same hash for the type and every
/// referenced type.
fn check_share(share: &Path, sp: &SearchPath) -> Outcome {
    let mut out = Outcome {
        checked_files: 0,
        checked_hashes: 0,
        idl_only: Vec::new(),
    };
    let mut reg = Registry::new();
    let mut failures = Vec::new();
    for path in json_files(share) {
        let json = common::read_json(&path);
        let hashes = json["type_hashes"].as_array().expect("type_hashes");
        let main_name = json["type_description_msg"]["type_description"]["type_name"]
            .as_str()
            .unwrap()
            .to_string();
        let main_hash = hashes[0]["hash_string"].as_str().unwrap();
        let desc = TypeDescription::from_json(&json).unwrap();
        if desc.hash().to_string() != main_hash {
            failures.push(format!(
                "{}: hash of the file's own description {} != {main_hash}",
                path.display(),
                desc.hash()
            ));
        }
        out.checked_files += 1;
        let src = path.with_extension(path.parent().unwrap().file_name().unwrap());
        if !src.exists() {
            out.idl_only.push(main_name);
            continue;
        }
        match reg.load(&main_name, sp) {
            Ok(_) => {}
            Err(RegistryError::NotFound { name, .. }) => {
                out.idl_only
                    .push(format!("{main_name} (dependency {name} has no .msg)"));
                continue;
            }
            Err(e) => {
                failures.push(format!("{}: {e}", path.display()));
                continue;
            }
        }
        for h in hashes {
            let t = h["type_name"].as_str().unwrap();
            let expected = h["hash_string"].as_str().unwrap();
            match reg.type_hash(t) {
                Ok(got) if got.to_string() == expected => out.checked_hashes += 1,
                Ok(got) => {
                    let ours = reg.type_description(t).unwrap().hash_input();
                    failures.push(format!(
                        "{} ({t}): got {got}, expected {expected}\n  our hash input: {ours}",
                        path.display()
                    ))
                }
                Err(e) => failures.push(format!("{} ({t}): {e}", path.display())),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} hash failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    out
}

#[test]
fn fixture_hashes_match_rosidl() {
    let share = common::fixtures().join("share");
    let out = check_share(&share, &common::fixture_search_path());
    assert!(out.idl_only.is_empty(), "{:?}", out.idl_only);
    assert!(
        out.checked_files >= 25,
        "only {} fixture files",
        out.checked_files
    );
    assert!(
        out.checked_hashes >= 100,
        "only {} hashes",
        out.checked_hashes
    );
}

#[test]
fn known_hashes() {
    let reg = common::registry(&[
        "std_msgs/msg/String",
        "test_msgs/action/Fibonacci",
        "test_msgs/srv/BasicTypes",
    ]);
    assert_eq!(
        reg.type_hash("std_msgs/String").unwrap().to_string(),
        "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
    );
    assert_eq!(
        reg.type_hash("test_msgs/action/Fibonacci")
            .unwrap()
            .to_string(),
        "RIHS01_be9273e3557225044b4a040811112491f7079326e3a573f83258b0b4c30bd069"
    );
}

/// Every `.json` of a real ROS 2 installation. Set `NERVE_ROS2_SHARE` to share directories
/// (`:`-separated), or source a ROS 2 setup so `AMENT_PREFIX_PATH` is set.
#[test]
fn installed_hashes_match_rosidl() {
    let mut sp = SearchPath::new();
    if let Some(v) = std::env::var_os("NERVE_ROS2_SHARE") {
        for d in std::env::split_paths(&v) {
            sp.push_share_dir(d);
        }
    } else {
        sp = SearchPath::from_env();
    }
    let shares: Vec<PathBuf> = sp.dirs().iter().filter(|d| d.is_dir()).cloned().collect();
    if shares.is_empty() {
        println!("SKIPPED installed_hashes_match_rosidl: set NERVE_ROS2_SHARE=<ros>/share or AMENT_PREFIX_PATH");
        return;
    }
    let (mut files, mut hashes, mut idl_only) = (0, 0, Vec::new());
    for share in &shares {
        let out = check_share(share, &sp);
        files += out.checked_files;
        hashes += out.checked_hashes;
        idl_only.extend(out.idl_only);
    }
    println!(
        "checked {files} type description files, {hashes} hashes via .msg/.srv/.action; {} only checked from their JSON (no .msg source): {idl_only:?}",
        idl_only.len()
    );
    assert!(files > 0, "no .json files found in {shares:?}");
}
