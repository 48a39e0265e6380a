//! Registry construction: ros2msg schemas (rosbag2 MCAP), search paths, service/action
//! generation.

mod common;

use nerve_ros2_types::{
    decode, decode_with_len, encode, to_json, validate, DefinitionRole, Registry, RegistryError,
    SearchPath, TypeName,
};

#[test]
fn rosbag2_schemas_and_messages() {
    let mut total = 0;
    for bag in ["cdr_test", "topics_and_services"] {
        let j = common::read_json(&common::fixtures().join(format!("bags/{bag}.json")));
        for (type_name, schema) in j["schemas"].as_object().unwrap() {
            assert_eq!(schema["encoding"], "ros2msg");
            let text = schema["data"].as_str().unwrap();
            let reg = Registry::from_ros2msg(type_name, text)
                .unwrap_or_else(|e| panic!("{bag} {type_name}: {e}"));
            // Writing the schema back gives exactly what rosbag2 wrote.
            assert_eq!(
                reg.ros2msg_text(type_name).unwrap(),
                text,
                "{bag} {type_name}: ros2msg_text"
            );
            for m in j["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["type"] == *type_name)
            {
                let bytes = common::unhex(m["hex"].as_str().unwrap());
                validate(&reg, type_name, &bytes)
                    .unwrap_or_else(|e| panic!("{bag} {type_name}: {e}"));
                let (v, len) = decode_with_len(&reg, type_name, &bytes).unwrap();
                let mut zero = Vec::new();
                let mut ff = Vec::new();
                encode(&reg, type_name, &v, &mut zero).unwrap();
                nerve_ros2_types::cdr::encode_with_padding(&reg, type_name, &v, &mut ff, 0xff)
                    .unwrap();
                assert_eq!(zero.len(), len);
                common::assert_eq_modulo_padding(&zero, &ff, &bytes, type_name);
                total += 1;
            }
        }
    }
    assert!(total >= 15, "{total} messages");
}

#[test]
fn cdr_test_bag_values() {
    let j = common::read_json(&common::fixtures().join("bags/cdr_test.json"));
    let t = "test_msgs/msg/BasicTypes";
    let reg = Registry::from_ros2msg(t, j["schemas"][t]["data"].as_str().unwrap()).unwrap();
    let m = j["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["type"] == t)
        .unwrap();
    let v = decode(&reg, t, &common::unhex(m["hex"].as_str().unwrap())).unwrap();
    assert_eq!(v.get("int32_value").and_then(|x| x.as_i64()), Some(123));
    let t = "test_msgs/msg/Arrays";
    let reg = Registry::from_ros2msg(t, j["schemas"][t]["data"].as_str().unwrap()).unwrap();
    let m = j["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["type"] == t)
        .unwrap();
    let v = decode(&reg, t, &common::unhex(m["hex"].as_str().unwrap())).unwrap();
    assert_eq!(
        to_json(v.get("string_values_default").unwrap()),
        serde_json::json!(["", "max value", "min value"])
    );
    assert_eq!(
        to_json(v.get("bool_values").unwrap()),
        serde_json::json!([true, false, true])
    );
}

#[test]
fn service_event_schema_uses_srv_text() {
    // rosbag2 writes the .srv text as the schema of service event topics.
    let reg = Registry::from_ros2msg(
        "example_interfaces/srv/AddTwoInts_Event",
        "int64 a\nint64 b\n---\nint64 sum\n",
    )
    .unwrap();
    let ev = reg.get("example_interfaces/srv/AddTwoInts_Event").unwrap();
    let names: Vec<&str> = ev.fields.iter().map(|f| &*f.name).collect();
    assert_eq!(names, ["info", "request", "response"]);
    assert!(reg.get("service_msgs/msg/ServiceEventInfo").is_some());
    assert_eq!(
        reg.get("example_interfaces/srv/AddTwoInts").unwrap().role,
        DefinitionRole::Service
    );
}

#[test]
fn ros2msg_round_trip_preserves_hashes() {
    let names = [
        "sensor_msgs/msg/Imu",
        "sensor_msgs/msg/PointCloud2",
        "test_msgs/msg/MultiNested",
        "test_msgs/msg/Constants",
        "test_msgs/srv/BasicTypes_Event",
        "test_msgs/srv/BasicTypes_Request",
        "test_msgs/action/Fibonacci_FeedbackMessage",
        "test_msgs/action/Fibonacci_SendGoal_Event",
        "test_msgs/action/NestedMessage_GetResult_Response",
    ];
    let reg = common::registry(&names);
    for n in names {
        let text = reg.ros2msg_text(n).unwrap();
        let reg2 = Registry::from_ros2msg(n, &text).unwrap_or_else(|e| panic!("{n}: {e}\n{text}"));
        assert_eq!(
            reg2.type_hash(n).unwrap(),
            reg.type_hash(n).unwrap(),
            "{n}:\n{text}"
        );
        assert_eq!(reg2.ros2msg_text(n).unwrap(), text, "{n}");
    }
    let imu = reg.ros2msg_text("sensor_msgs/msg/Imu").unwrap();
    assert!(imu.contains("\n================================================================================\nMSG: std_msgs/Header\n"), "{imu}");
}

#[test]
fn missing_type_names_every_directory() {
    let mut sp = SearchPath::new();
    sp.push_share_dir(common::fixtures().join("share"));
    sp.push_share_dir("/nonexistent/share");
    let mut reg = Registry::new();
    let e = reg.load("nope_msgs/msg/Missing", &sp).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, RegistryError::NotFound { .. }), "{text}");
    assert!(
        text.contains("nope_msgs/msg/Missing") && text.contains("/nonexistent/share"),
        "{text}"
    );
    assert!(
        text.contains(&common::fixtures().join("share").display().to_string()),
        "{text}"
    );
    // A missing dependency names the type that needs it.
    let dir = std::env::temp_dir().join(format!("nerve-ros2-types-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("my_msgs/msg")).unwrap();
    std::fs::write(dir.join("my_msgs/msg/Thing.msg"), "other_msgs/Gone g\n").unwrap();
    let mut sp = SearchPath::new();
    sp.push_dir(&dir);
    let e = reg.load("my_msgs/Thing", &sp).unwrap_err();
    assert!(
        e.to_string().contains("other_msgs/msg/Gone")
            && e.to_string().contains("my_msgs/msg/Thing"),
        "{e}"
    );
    // A package directory itself also works as a types dir.
    std::fs::write(dir.join("my_msgs/msg/Ok.msg"), "int32 x\n").unwrap();
    let mut sp = SearchPath::new();
    sp.push_dir(dir.join("my_msgs"));
    reg.load("my_msgs/msg/Ok", &sp).unwrap();
    // Parse errors carry the file path and line.
    std::fs::write(dir.join("my_msgs/msg/Bad.msg"), "int32 x\nfloat99 y\n").unwrap();
    let e = reg.load("my_msgs/msg/Bad", &sp).unwrap_err();
    assert!(
        e.to_string().contains("Bad.msg:2") && e.to_string().contains("float99"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn srv_and_action_subtypes() {
    let reg = common::registry(&[
        "test_msgs/action/Fibonacci",
        "test_msgs/srv/Arrays_Response",
    ]);
    for n in [
        "test_msgs/action/Fibonacci_Goal",
        "test_msgs/action/Fibonacci_Result",
        "test_msgs/action/Fibonacci_Feedback",
        "test_msgs/action/Fibonacci_SendGoal",
        "test_msgs/action/Fibonacci_SendGoal_Request",
        "test_msgs/action/Fibonacci_SendGoal_Response",
        "test_msgs/action/Fibonacci_SendGoal_Event",
        "test_msgs/action/Fibonacci_GetResult_Request",
        "test_msgs/action/Fibonacci_GetResult_Response",
        "test_msgs/action/Fibonacci_GetResult_Event",
        "test_msgs/action/Fibonacci_FeedbackMessage",
        "test_msgs/srv/Arrays_Request",
        "test_msgs/srv/Arrays_Event",
    ] {
        assert!(reg.contains(n), "{n}");
    }
    let t = TypeName::parse("test_msgs/action/Fibonacci_SendGoal_Request").unwrap();
    assert_eq!(
        t.to_dds_name(),
        "test_msgs::action::dds_::Fibonacci_SendGoal_Request_"
    );
    // Service/action composites have hashes but no wire form.
    assert!(decode(&reg, "test_msgs/action/Fibonacci", &[0, 1, 0, 0]).is_err());
}

#[test]
fn load_all_fixtures() {
    let mut reg = Registry::new();
    let report = reg.load_all(&common::fixture_search_path());
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.loaded.len(), 29);
}
