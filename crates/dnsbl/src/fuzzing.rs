//! Entry points for the fuzz targets in `fuzz/`; not an API. Each runs one
//! path that reads untrusted bytes and panics when a property fails.

use std::sync::{Arc, OnceLock};

use hickory_proto::op::Message;

use crate::answer::{respond, Transport, ZoneData, Zones};
use crate::ip4set::Ip4Set;
use crate::qname::zone_name;

fn zones() -> &'static Zones {
    static ZONES: OnceLock<Zones> = OnceLock::new();
    ZONES.get_or_init(|| {
        let list = Ip4Set::parse(
            "$NS 0 ns1.bl.test\n:127.0.0.4:listed $\n192.0.2.1\n192.0.2.0/25\n198.51.100.7 :127.0.0.2:spam\n!192.0.2.9\n",
        );
        Zones::new(vec![Arc::new(ZoneData::new(
            zone_name("bl.test").expect("zone name"),
            list,
            1,
            300,
        ))])
    })
}

/// A packet from the network, answered as over UDP and over TCP: nothing
/// panics, and every answer is a DNS response with the query's ID.
pub fn query(packet: &[u8]) {
    for transport in [Transport::Udp, Transport::Tcp] {
        let reply = respond(zones(), packet, transport);
        let Some(bytes) = reply.bytes else { continue };
        let message = Message::from_vec(&bytes).expect("our answer parses");
        assert_eq!(message.id(), u16::from_be_bytes([packet[0], packet[1]]));
        assert_eq!(
            message.message_type(),
            hickory_proto::op::MessageType::Response
        );
        if transport == Transport::Udp {
            assert!(bytes.len() <= 4096, "a UDP answer of {} bytes", bytes.len());
        }
    }
}

/// A list file in rbldnsd's ip4set format: read without a panic.
pub fn zone_text(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Ip4Set::parse(text);
    }
}
