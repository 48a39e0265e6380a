//! ROS 2 services on DDS, with the request/reply mapping of Fast DDS (and of every ROS 2
//! RMW since Foxy's "enhanced" mapping): requests on `rq/<name>Request`, replies on
//! `rr/<name>Reply`, a reply naming its request by the related sample identity.

use super::side::DdsSide;
use super::{RawAdapter, RawCdr, RosQos};
use crate::peers::Peers;
use crate::BridgeError;
use rustdds::no_key::{DataReader, DataWriter};
use rustdds::{RTPSEntity, SampleIdentity, Timestamp, TopicKind, WriteOptionsBuilder};

/// The request and reply topics of ROS 2 service `name`.
pub(crate) fn topics(name: &str) -> (String, String) {
    (format!("rq{name}Request"), format!("rr{name}Reply"))
}

/// A ROS 2 service name from its request topic (`rq/ns/svcRequest` → `/ns/svc`).
pub(crate) fn service_of_request_topic(dds: &str) -> Option<&str> {
    dds.strip_prefix("rq")
        .and_then(|s| s.strip_suffix("Request"))
        .filter(|s| s.starts_with('/'))
}

/// `pkg::srv::dds_::Name_Request_` → `pkg/srv/Name`.
pub(crate) fn service_type_of_request(dds_type: &str) -> Option<String> {
    let ros = crate::types::ros_type_of_dds(dds_type)?;
    ros.strip_suffix("_Request").map(str::to_string)
}

/// A DDS reader of raw CDR.
type Reader = DataReader<RawCdr, RawAdapter>;
/// A DDS writer of raw CDR.
type Writer = DataWriter<RawCdr, RawAdapter>;

/// The reader and writer of service `name` of type `ros_type` (`pkg/srv/Name`): a server
/// reads requests and writes replies, a client the reverse.
fn endpoints(
    side: &DdsSide,
    name: &str,
    ros_type: &str,
    server: bool,
) -> Result<(Reader, Writer), BridgeError> {
    let (rq, rr) = topics(name);
    let qos = RosQos::default().policies();
    let dds_err = |e: &dyn std::fmt::Display| BridgeError::Dds(format!("{name}: {e}"));
    let ty = |suffix: &str| format!("{ros_type}{suffix}");
    let rq = side.topic(rq, &ty("_Request"), &qos, TopicKind::NoKey)?;
    let rr = side.topic(rr, &ty("_Response"), &qos, TopicKind::NoKey)?;
    let (read, write) = if server { (&rq, &rr) } else { (&rr, &rq) };
    let reader = side
        .dds_subscriber()
        .create_datareader_no_key::<RawCdr, RawAdapter>(read, Some(qos.clone()))
        .map_err(|e| dds_err(&e))?;
    let writer = side
        .dds_publisher()
        .create_datawriter_no_key::<RawCdr, RawAdapter>(write, Some(qos))
        .map_err(|e| dds_err(&e))?;
    Ok((reader, writer))
}

/// A service server on DDS (a Nerve server offered to ROS 2 clients).
pub struct DdsServer {
    requests: Reader,
    replies: Writer,
    /// This participant.
    me: rustdds::GUID,
}

impl DdsServer {
    pub(crate) fn new(
        side: &DdsSide,
        name: &str,
        ros_type: &str,
    ) -> Result<DdsServer, BridgeError> {
        let (requests, replies) = endpoints(side, name, ros_type, true)?;
        Ok(DdsServer {
            requests,
            replies,
            me: side.participant.guid(),
        })
    }
}

impl crate::engine::ServiceServer for DdsServer {
    type Request = SampleIdentity;

    fn take(&mut self, peers: &Peers) -> Option<(SampleIdentity, Vec<u8>)> {
        while let Ok(Some(sample)) = self.requests.take_next_sample() {
            let info = sample.sample_info();
            let writer = info.writer_guid().prefix;
            if writer == self.me.prefix || peers.is_bridge_participant(writer.as_ref()) {
                continue;
            }
            let id = info.sample_identity();
            return Some((id, sample.into_value().0));
        }
        None
    }

    fn reply(&mut self, to: SampleIdentity, cdr: Vec<u8>) -> Result<(), String> {
        let opts = WriteOptionsBuilder::new()
            .source_timestamp(Timestamp::now())
            .related_sample_identity(to)
            .build();
        self.replies
            .write_with_options(RawCdr(cdr), opts)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// A service client on DDS (a ROS 2 server offered to Nerve clients).
pub struct DdsClient {
    requests: Writer,
    replies: Reader,
}

impl DdsClient {
    pub(crate) fn new(
        side: &DdsSide,
        name: &str,
        ros_type: &str,
    ) -> Result<DdsClient, BridgeError> {
        let (replies, requests) = endpoints(side, name, ros_type, false)?;
        Ok(DdsClient { requests, replies })
    }
}

impl crate::engine::ServiceClient for DdsClient {
    type Call = SampleIdentity;

    fn call(&mut self, cdr: Vec<u8>) -> Result<SampleIdentity, String> {
        let opts = WriteOptionsBuilder::new()
            .source_timestamp(Timestamp::now())
            .build();
        self.requests
            .write_with_options(RawCdr(cdr), opts)
            .map_err(|e| format!("ROS 2 request not sent: {e}"))
    }

    fn take(&mut self) -> Option<(SampleIdentity, Result<Vec<u8>, String>)> {
        let mine = self.requests.guid();
        while let Ok(Some(sample)) = self.replies.take_next_sample() {
            // replies to other clients' requests are not ours
            match sample.sample_info().related_sample_identity() {
                Some(id) if id.writer_guid == mine => return Some((id, Ok(sample.into_value().0))),
                _ => continue,
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_names_and_types_map_from_dds() {
        assert_eq!(
            service_of_request_topic("rq/ns/add_two_intsRequest"),
            Some("/ns/add_two_ints")
        );
        assert_eq!(service_of_request_topic("rt/chatter"), None);
        assert_eq!(
            service_type_of_request("std_srvs::srv::dds_::SetBool_Request_").as_deref(),
            Some("std_srvs/srv/SetBool")
        );
    }
}
