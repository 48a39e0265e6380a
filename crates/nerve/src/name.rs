//! Topic and node names.
//!
//! Grammar: a topic name is absolute, `/` followed by one or more segments separated by
//! `/`; a segment starts with a letter or `_` and continues with letters, digits and `_`.
//! At most 200 bytes. Examples: `/imu`, `/robot1/lidar/points`. Node names are one segment.

use crate::error::NameError;

/// Longest topic name in bytes.
pub const MAX_TOPIC_LEN: usize = 200;

fn valid_segment(seg: &str) -> bool {
    let mut chars = seg.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Checks a topic name against the grammar.
pub fn validate_topic(name: &str) -> Result<(), NameError> {
    let err = |reason: &str| NameError {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.len() > MAX_TOPIC_LEN {
        return Err(err("longer than 200 bytes"));
    }
    let Some(rest) = name.strip_prefix('/') else {
        return Err(err("must start with '/'"));
    };
    if rest.is_empty() {
        return Err(err("needs at least one segment after '/'"));
    }
    for seg in rest.split('/') {
        if !valid_segment(seg) {
            return Err(err(
                "segments must start with a letter or '_' and hold only letters, digits and '_'",
            ));
        }
    }
    Ok(())
}

/// Checks a node name (one segment, at most 64 bytes).
pub fn validate_node(name: &str) -> Result<(), NameError> {
    if name.len() > 64 || !valid_segment(name) {
        return Err(NameError {
            name: name.to_string(),
            reason: "node names start with a letter or '_', hold only letters, digits and '_', at most 64 bytes".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar() {
        for ok in ["/a", "/a/b_c", "/_x/y2", "/robot1/lidar/points"] {
            validate_topic(ok).unwrap();
        }
        for bad in ["", "/", "a/b", "/a/", "//a", "/1a", "/a-b", "/a b", "/ä"] {
            assert!(validate_topic(bad).is_err(), "{bad} accepted");
        }
        assert!(validate_topic(&format!("/{}", "a".repeat(250))).is_err());
        validate_node("talker").unwrap();
        assert!(validate_node("bad/name").is_err());
    }
}
