//! The server's DNS logic: one query packet in, one reply packet out. No I/O.
//!
//! What a zone answers (RFC 1034 §4.3.2 authoritative behaviour):
//!
//! - `d.c.b.a.ZONE` A / TXT: the list's answers for `a.b.c.d` (RFC 5782 §2.1);
//! - `h.z.y.x.ZONE` AAAA with `h` 0 or 1: the /25 bitmap ([`crate::bitmap`]);
//! - the apex: SOA and NS;
//! - a name that exists but has no record of the type asked: NOERROR with an
//!   empty answer (NODATA) and the SOA; a name that does not exist: NXDOMAIN
//!   and the SOA, so resolvers cache the negative answer (RFC 2308 §3).
//!
//! A four-label name "exists" when its address is listed *or* its bitmap is
//! not empty: RFC 2308 makes NXDOMAIN hold for every type of the name, so
//! answering NXDOMAIN to an A query for `0.2.0.192.ZONE` would let a caching
//! resolver hide a non-empty bitmap behind it.
//!
//! Names outside every zone get REFUSED; nothing is ever recursed.
//!
//! Plain queries (one uncompressed question, at most an OPT record: what
//! resolvers send) are read and written directly on the bytes; anything else
//! goes through hickory's message codec. Both paths share one decision
//! ([`plan`]) and a property test holds their replies equal.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, NS, SOA, TXT};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

use crate::bitmap::Bitmap;
use crate::ip4set::Ip4Set;
use crate::qname::{relative, Relative};

/// EDNS payload size we advertise and honour at most (DNS flag day 2020).
const EDNS_PAYLOAD: u16 = 1232;

/// One zone, ready to answer.
#[derive(Debug)]
pub(crate) struct ZoneData {
    pub(crate) name: Name,
    pub(crate) list: Ip4Set,
    /// The apex's labels, lower case, leftmost first (for the wire path).
    labels: Vec<Vec<u8>>,
    ttl: u32,
    soa: Record,
    soa_ttl: u32,
    soa_wire: Vec<u8>,
    negative_ttl: u32,
    ns: Vec<Record>,
    ns_wire: Vec<(u32, Vec<u8>)>,
}

/// A name in uncompressed wire form (RFC 1035 §3.1).
fn wire_name(name: &Name) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    for label in name.iter() {
        out.push(label.len() as u8);
        out.extend_from_slice(label);
    }
    out.push(0);
    out
}

impl ZoneData {
    /// Builds a zone from its list. `serial` is used when `$SOA` gives 0 or
    /// there is no `$SOA`; `default_ttl` when there is no `$TTL`.
    pub(crate) fn new(name: Name, list: Ip4Set, serial: u32, default_ttl: u32) -> Self {
        let ttl = list.ttl().unwrap_or(default_ttl);
        let parse = |s: &str| -> Option<Name> {
            let mut n = Name::from_ascii(s.trim_end_matches('.')).ok()?;
            n.set_fqdn(true);
            Some(n)
        };
        let hostmaster = Name::from_ascii("hostmaster").map_or_else(
            |_| name.clone(),
            |h| h.append_domain(&name).unwrap_or_else(|_| name.clone()),
        );
        let (soa_ttl, rdata) = match list.soa() {
            Some(s) => (
                s.ttl.unwrap_or(ttl),
                SOA::new(
                    parse(&s.mname).unwrap_or_else(|| name.clone()),
                    parse(&s.rname).unwrap_or_else(|| hostmaster.clone()),
                    if s.serial == 0 { serial } else { s.serial },
                    s.refresh as i32,
                    s.retry as i32,
                    s.expire as i32,
                    s.minimum,
                ),
            ),
            None => (
                ttl,
                SOA::new(name.clone(), hostmaster, serial, 3600, 600, 604_800, ttl),
            ),
        };
        // RFC 2308 §3: the negative TTL is the smaller of the SOA's TTL and MINIMUM
        let negative_ttl = soa_ttl.min(rdata.minimum());
        let mut soa_wire = wire_name(rdata.mname());
        soa_wire.extend(wire_name(rdata.rname()));
        for n in [
            rdata.serial(),
            rdata.refresh() as u32,
            rdata.retry() as u32,
            rdata.expire() as u32,
            rdata.minimum(),
        ] {
            soa_wire.extend_from_slice(&n.to_be_bytes());
        }
        let soa = Record::from_rdata(name.clone(), soa_ttl, RData::SOA(rdata));
        let ns_names: Vec<(u32, Name)> = list
            .ns()
            .map(|ns| {
                ns.names
                    .iter()
                    .filter_map(|n| parse(n))
                    .map(|n| (ns.ttl.unwrap_or(ttl), n))
                    .collect()
            })
            .unwrap_or_default();
        let ns = ns_names
            .iter()
            .map(|(t, n)| Record::from_rdata(name.clone(), *t, RData::NS(NS(n.clone()))))
            .collect();
        let ns_wire = ns_names.iter().map(|(t, n)| (*t, wire_name(n))).collect();
        let labels = name.iter().map(|l| l.to_ascii_lowercase()).collect();
        ZoneData {
            name,
            list,
            labels,
            ttl,
            soa,
            soa_ttl,
            soa_wire,
            negative_ttl,
            ns,
            ns_wire,
        }
    }
}

/// All zones a server answers for, longest name first.
#[derive(Debug, Default)]
pub(crate) struct Zones {
    zones: Vec<Arc<ZoneData>>,
}

impl Zones {
    pub(crate) fn new(mut zones: Vec<Arc<ZoneData>>) -> Self {
        zones.sort_by_key(|z| std::cmp::Reverse(z.name.num_labels()));
        Zones { zones }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<ZoneData>> {
        self.zones.iter()
    }

    fn find(&self, qname: &Name) -> Option<&ZoneData> {
        self.zones
            .iter()
            .map(|z| &**z)
            .find(|z| z.name.zone_of(qname))
    }

    /// The zone holding a name given as wire labels, and how many of the
    /// name's labels are in front of the zone's apex.
    fn find_labels(&self, labels: &[&[u8]]) -> Option<(&ZoneData, usize)> {
        self.zones.iter().map(|z| &**z).find_map(|z| {
            let k = z.labels.len();
            let n = labels.len().checked_sub(k)?;
            labels[n..]
                .iter()
                .zip(&z.labels)
                .all(|(a, b)| a.eq_ignore_ascii_case(b))
                .then_some((z, n))
        })
    }
}

/// How a query came in: UDP replies are limited in size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    Udp,
    Tcp,
}

/// What was done with a packet, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// Positive answer.
    Answer,
    /// Name exists, no record of that type.
    NoData,
    /// Name does not exist.
    NxDomain,
    /// Outside our zones, or not class IN.
    Refused,
    /// Unparseable, or more than one question.
    FormErr,
    /// Not a standard query.
    NotImp,
    /// Not answered at all (a response, or shorter than a header).
    Dropped,
}

/// A reply to send (if any), what it was, and whether it was a bitmap query.
pub(crate) struct Reply {
    pub(crate) bytes: Option<Vec<u8>>,
    pub(crate) disposition: Disposition,
    pub(crate) bitmap: bool,
}

fn dropped() -> Reply {
    Reply {
        bytes: None,
        disposition: Disposition::Dropped,
        bitmap: false,
    }
}

/// One record of an answer, before encoding.
#[derive(Debug, Clone, PartialEq)]
enum Data {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Txt(String),
    Soa,
    Ns(usize),
}

/// What to answer to a question inside a zone, before encoding.
#[derive(Debug)]
struct Plan {
    answers: Vec<Data>,
    disposition: Disposition,
    bitmap: bool,
}

/// Decides the answer to `qtype` for the labels `rel` in front of the apex.
fn plan(zone: &ZoneData, rel: &[&[u8]], qtype: RecordType) -> Plan {
    let mut answers = Vec::new();
    let mut bitmap = false;
    let exists = match relative(rel) {
        Relative::Apex => {
            if matches!(qtype, RecordType::SOA | RecordType::ANY) {
                answers.push(Data::Soa);
            }
            if matches!(qtype, RecordType::NS | RecordType::ANY) {
                answers.extend((0..zone.ns.len()).map(Data::Ns));
            }
            true
        }
        Relative::Ipv4 { ip, block } => {
            let listed = zone.list.lookup(ip);
            let bits = block.map_or(Bitmap::EMPTY, |b| zone.list.bitmap(b));
            if let Some(list) = listed {
                for a in list {
                    if matches!(qtype, RecordType::A | RecordType::ANY)
                        && !answers.contains(&Data::A(a.a))
                    {
                        answers.push(Data::A(a.a));
                    }
                    if matches!(qtype, RecordType::TXT | RecordType::ANY) {
                        if let Some(t) = zone.list.txt(a, ip) {
                            let t = Data::Txt(t);
                            if !answers.contains(&t) {
                                answers.push(t);
                            }
                        }
                    }
                }
            }
            bitmap = qtype == RecordType::AAAA && block.is_some();
            if matches!(qtype, RecordType::AAAA | RecordType::ANY) && !bits.is_empty() {
                answers.push(Data::Aaaa(bits.to_ipv6()));
            }
            listed.is_some() || !bits.is_empty()
        }
        // an empty non-terminal above listed addresses: answering NXDOMAIN
        // here would, by RFC 8020, deny every address below it
        Relative::PartialIpv4 => true,
        // ip4set lists hold IPv4 only
        Relative::Ipv6(_) | Relative::Other => false,
    };
    let disposition = if !answers.is_empty() {
        Disposition::Answer
    } else if exists {
        Disposition::NoData
    } else {
        Disposition::NxDomain
    };
    Plan {
        answers,
        disposition,
        bitmap,
    }
}

/// TXT character-strings: at most 255 octets each (RFC 1035 §3.3).
fn txt_chunks(text: &str) -> Vec<&[u8]> {
    let bytes = text.as_bytes();
    if bytes.is_empty() {
        vec![&[][..]]
    } else {
        bytes.chunks(255).collect()
    }
}

/// Answers one DNS packet.
pub(crate) fn respond(zones: &Zones, packet: &[u8], transport: Transport) -> Reply {
    if packet.len() < 12 || packet[2] & 0x80 != 0 {
        // too short to hold a header, or a response: never answer those
        return dropped();
    }
    // Plain queries (nearly all traffic) are read and written directly;
    // anything unusual goes through hickory's full message codec.
    fast_respond(zones, packet, transport).unwrap_or_else(|| slow_respond(zones, packet, transport))
}

fn udp_limit(transport: Transport, edns_payload: Option<u16>) -> usize {
    match (transport, edns_payload) {
        (Transport::Tcp, _) => usize::from(u16::MAX),
        (Transport::Udp, Some(p)) => usize::from(p.clamp(512, EDNS_PAYLOAD)),
        (Transport::Udp, None) => 512,
    }
}

/// The wire path: a standard query with one uncompressed question and at
/// most an OPT record. Returns `None` for anything else.
fn fast_respond(zones: &Zones, p: &[u8], transport: Transport) -> Option<Reply> {
    let u16_at =
        |i: usize| -> Option<u16> { Some(u16::from_be_bytes([*p.get(i)?, *p.get(i + 1)?])) };
    let flags = u16_at(2)?;
    let (qd, an, ns, ar) = (u16_at(4)?, u16_at(6)?, u16_at(8)?, u16_at(10)?);
    if flags & 0x7800 != 0 || qd != 1 || an != 0 || ns != 0 || ar > 1 {
        return None;
    }
    let mut labels: Vec<&[u8]> = Vec::with_capacity(8);
    let mut i = 12;
    loop {
        let len = usize::from(*p.get(i)?);
        if len == 0 {
            i += 1;
            break;
        }
        // compression pointers and extended label types: the slow path
        if len > 63 || i + 1 + len > p.len() || i + 1 + len - 12 > 254 {
            return None;
        }
        labels.push(&p[i + 1..i + 1 + len]);
        i += 1 + len;
    }
    let question_end = i + 4;
    let qtype = RecordType::from(u16_at(i)?);
    let qclass = u16_at(i + 2)?;
    let mut edns = None;
    i = question_end;
    if ar == 1 {
        // RFC 6891 §6.1.2: root name, type OPT, class = payload size
        if *p.get(i)? != 0 || u16_at(i + 1)? != 41 || *p.get(i + 6)? != 0 {
            return None;
        }
        edns = Some(u16_at(i + 3)?);
        i += 11 + usize::from(u16_at(i + 9)?);
    }
    if i != p.len() || qtype == RecordType::OPT {
        return None;
    }

    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(&p[..2]);
    out.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&p[12..question_end]);
    let rd = flags & 0x0100;
    let found = if qclass == u16::from(DNSClass::IN) {
        zones.find_labels(&labels)
    } else {
        None
    };
    let (mut header, plan, apex_at) = match found {
        None => (0x8000 | rd | 5, None, 0),
        Some((zone, n)) => {
            let plan = plan(zone, &labels[..n], qtype);
            let rcode = if plan.disposition == Disposition::NxDomain {
                3
            } else {
                0
            };
            let apex_at = 12 + labels[..n].iter().map(|l| l.len() + 1).sum::<usize>();
            (0x8000 | 0x0400 | rd | rcode, Some((zone, plan)), apex_at)
        }
    };
    let question_len = out.len();
    let (mut an_count, mut ns_count) = (0u16, 0u16);
    if let Some((zone, plan)) = &plan {
        let apex = [0xc0 | (apex_at >> 8) as u8, apex_at as u8];
        let record =
            |out: &mut Vec<u8>, owner: [u8; 2], rtype: RecordType, ttl: u32, rdata: &[&[u8]]| {
                out.extend_from_slice(&owner);
                out.extend_from_slice(&u16::from(rtype).to_be_bytes());
                out.extend_from_slice(&[0, 1]);
                out.extend_from_slice(&ttl.to_be_bytes());
                let len: usize = rdata.iter().map(|r| r.len()).sum();
                out.extend_from_slice(&(len as u16).to_be_bytes());
                for r in rdata {
                    out.extend_from_slice(r);
                }
            };
        let qname_ptr = [0xc0, 12];
        for data in &plan.answers {
            match data {
                Data::A(a) => record(&mut out, qname_ptr, RecordType::A, zone.ttl, &[&a.octets()]),
                Data::Aaaa(a) => record(
                    &mut out,
                    qname_ptr,
                    RecordType::AAAA,
                    zone.ttl,
                    &[&a.octets()],
                ),
                Data::Txt(t) => {
                    let chunks = txt_chunks(t);
                    let mut rdata = Vec::with_capacity(t.len() + chunks.len());
                    for c in chunks {
                        rdata.push(c.len() as u8);
                        rdata.extend_from_slice(c);
                    }
                    record(&mut out, qname_ptr, RecordType::TXT, zone.ttl, &[&rdata]);
                }
                Data::Soa => record(
                    &mut out,
                    apex,
                    RecordType::SOA,
                    zone.soa_ttl,
                    &[&zone.soa_wire],
                ),
                Data::Ns(i) => {
                    let (ttl, name) = &zone.ns_wire[*i];
                    record(&mut out, apex, RecordType::NS, *ttl, &[name]);
                }
            }
            an_count += 1;
        }
        if plan.answers.is_empty() {
            record(
                &mut out,
                apex,
                RecordType::SOA,
                zone.negative_ttl,
                &[&zone.soa_wire],
            );
            ns_count = 1;
        }
    }
    if out.len() + if edns.is_some() { 11 } else { 0 } > udp_limit(transport, edns) {
        // RFC 2181 §9: too big; send the header and question with TC
        out.truncate(question_len);
        an_count = 0;
        ns_count = 0;
        header |= 0x0200;
    }
    if edns.is_some() {
        out.extend_from_slice(&[0, 0, 41]);
        out.extend_from_slice(&EDNS_PAYLOAD.to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    }
    out[2..4].copy_from_slice(&header.to_be_bytes());
    out[6..8].copy_from_slice(&an_count.to_be_bytes());
    out[8..10].copy_from_slice(&ns_count.to_be_bytes());
    out[10..12].copy_from_slice(&u16::from(edns.is_some()).to_be_bytes());
    let (disposition, bitmap) = match plan {
        Some((_, plan)) => (plan.disposition, plan.bitmap),
        None => (Disposition::Refused, false),
    };
    Some(Reply {
        bytes: Some(out),
        disposition,
        bitmap,
    })
}

/// The general path, through hickory's message codec.
fn slow_respond(zones: &Zones, packet: &[u8], transport: Transport) -> Reply {
    let request = match Message::from_vec(packet) {
        Ok(m) => m,
        Err(_) => {
            // RFC 1035 §4.1.1: format error; echo the id and opcode only
            let id = u16::from_be_bytes([packet[0], packet[1]]);
            let opcode = OpCode::from_u8((packet[2] >> 3) & 0xf);
            let mut m = Message::error_msg(id, opcode, ResponseCode::FormErr);
            m.set_recursion_desired(packet[2] & 1 != 0);
            return Reply {
                bytes: m.to_vec().ok(),
                disposition: Disposition::FormErr,
                bitmap: false,
            };
        }
    };
    let mut response = Message::new();
    response
        .set_id(request.id())
        .set_message_type(MessageType::Response)
        .set_op_code(request.op_code())
        .set_recursion_desired(request.recursion_desired())
        .set_recursion_available(false);
    if request.extensions().is_some() {
        let mut edns = Edns::new();
        edns.set_max_payload(EDNS_PAYLOAD).set_version(0);
        response.set_edns(edns);
    }
    let limit = udp_limit(
        transport,
        request.extensions().as_ref().map(|e| e.max_payload()),
    );
    let mut bitmap = false;
    let disposition = if request.op_code() != OpCode::Query {
        response.set_response_code(ResponseCode::NotImp);
        Disposition::NotImp
    } else if request.queries().len() != 1 {
        response.set_response_code(ResponseCode::FormErr);
        Disposition::FormErr
    } else {
        let query = &request.queries()[0];
        response.add_query(query.clone());
        match (query.query_class(), zones.find(query.name())) {
            (DNSClass::IN, Some(zone)) => {
                response.set_authoritative(true);
                let (d, b) = answer(zone, query, &mut response);
                bitmap = b;
                d
            }
            _ => {
                response.set_response_code(ResponseCode::Refused);
                Disposition::Refused
            }
        }
    };
    let bytes = match response.to_vec() {
        Ok(b) if b.len() > limit => {
            // RFC 2181 §9: too big for UDP; send the header and question with TC
            response.take_answers();
            response.take_name_servers();
            response.set_truncated(true);
            response.to_vec().ok()
        }
        Ok(b) => Some(b),
        Err(_) => None,
    };
    Reply {
        bytes,
        disposition,
        bitmap,
    }
}

/// Fills the answer for a query inside `zone` (the general path); returns
/// what it was and whether it was a bitmap query.
fn answer(zone: &ZoneData, query: &Query, response: &mut Message) -> (Disposition, bool) {
    let qname = query.name();
    let all: Vec<&[u8]> = qname.iter().collect();
    let rel = &all[..all.len() - zone.name.num_labels() as usize];
    let plan = plan(zone, rel, query.query_type());
    for data in &plan.answers {
        let record = match data {
            Data::A(a) => Record::from_rdata(qname.clone(), zone.ttl, RData::A(A(*a))),
            Data::Aaaa(a) => Record::from_rdata(qname.clone(), zone.ttl, RData::AAAA(AAAA(*a))),
            Data::Txt(t) => Record::from_rdata(
                qname.clone(),
                zone.ttl,
                RData::TXT(TXT::from_bytes(txt_chunks(t))),
            ),
            Data::Soa => zone.soa.clone(),
            Data::Ns(i) => zone.ns[*i].clone(),
        };
        response.add_answer(record);
    }
    if plan.answers.is_empty() {
        let mut soa = zone.soa.clone();
        soa.set_ttl(zone.negative_ttl);
        response.add_name_server(soa);
    }
    if plan.disposition == Disposition::NxDomain {
        response.set_response_code(ResponseCode::NXDomain);
    }
    (plan.disposition, plan.bitmap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qname::zone_name;

    fn zones(text: &str) -> Zones {
        let name = zone_name("bl.test").unwrap();
        Zones::new(vec![Arc::new(ZoneData::new(
            name,
            Ip4Set::parse(text),
            1,
            300,
        ))])
    }

    fn ask(z: &Zones, name: &str, t: RecordType) -> Message {
        let mut m = Message::new();
        m.set_id(7)
            .add_query(Query::query(Name::from_ascii(name).unwrap(), t));
        let reply = respond(z, &m.to_vec().unwrap(), Transport::Udp);
        Message::from_vec(&reply.bytes.unwrap()).unwrap()
    }

    #[test]
    fn classic_bitmap_and_negative_answers() {
        let z = zones("$NS 0 ns1.bl.test\n:127.0.0.4:listed $\n192.0.2.1\n192.0.2.200\n");
        let r = ask(&z, "1.2.0.192.bl.test.", RecordType::A);
        assert_eq!(r.response_code(), ResponseCode::NoError);
        assert!(r.authoritative());
        assert_eq!(
            r.answers()[0].data(),
            &RData::A(A("127.0.0.4".parse().unwrap()))
        );
        let r = ask(&z, "1.2.0.192.BL.test.", RecordType::TXT);
        match r.answers()[0].data() {
            RData::TXT(t) => assert_eq!(&*t.txt_data()[0], b"listed 192.0.2.1"),
            other => panic!("{other:?}"),
        }
        // bitmap of the lower half: only .1 (bit 1)
        let r = ask(&z, "0.2.0.192.bl.test.", RecordType::AAAA);
        match r.answers()[0].data() {
            RData::AAAA(a) => assert_eq!(a.0, "4000::".parse::<std::net::Ipv6Addr>().unwrap()),
            other => panic!("{other:?}"),
        }
        // "0.2.0.192" as an address (192.0.2.0) is not listed, but the name
        // carries a bitmap: NODATA, not NXDOMAIN
        let r = ask(&z, "0.2.0.192.bl.test.", RecordType::A);
        assert_eq!(r.response_code(), ResponseCode::NoError);
        assert!(r.answers().is_empty());
        assert_eq!(r.name_servers()[0].record_type(), RecordType::SOA);
        // nothing listed in 198.51.100.0/25
        let r = ask(&z, "0.100.51.198.bl.test.", RecordType::AAAA);
        assert_eq!(r.response_code(), ResponseCode::NXDomain);
        let r = ask(&z, "9.2.0.192.bl.test.", RecordType::A);
        assert_eq!(r.response_code(), ResponseCode::NXDomain);
        assert_eq!(r.name_servers()[0].ttl(), 300);
        let r = ask(&z, "bl.test.", RecordType::SOA);
        assert_eq!(r.answers()[0].record_type(), RecordType::SOA);
        let r = ask(&z, "bl.test.", RecordType::NS);
        assert_eq!(
            r.answers()[0].data(),
            &RData::NS(NS(Name::from_ascii("ns1.bl.test.").unwrap()))
        );
        let r = ask(&z, "example.com.", RecordType::A);
        assert_eq!(r.response_code(), ResponseCode::Refused);
        assert!(!r.recursion_available());
        let r = ask(&z, "2.0.192.bl.test.", RecordType::A);
        assert_eq!(r.response_code(), ResponseCode::NoError);
    }

    #[test]
    fn garbage_gets_formerr_or_nothing() {
        let z = zones("192.0.2.1\n");
        assert!(respond(&z, b"", Transport::Udp).bytes.is_none());
        assert!(respond(&z, &[0u8; 5], Transport::Udp).bytes.is_none());
        let mut junk = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        junk.extend_from_slice(&[63, b'a', b'b']);
        let r = respond(&z, &junk, Transport::Udp);
        assert_eq!(r.disposition, Disposition::FormErr);
        let m = Message::from_vec(&r.bytes.unwrap()).unwrap();
        assert_eq!(m.id(), 0x1234);
        assert_eq!(m.response_code(), ResponseCode::FormErr);
        // a response is never answered (no reflection loops)
        let mut resp = junk.clone();
        resp[2] |= 0x80;
        assert!(respond(&z, &resp, Transport::Udp).bytes.is_none());
    }

    proptest::proptest! {
        /// Whatever arrives, the server answers or drops it without
        /// panicking, and an answer carries the query's id.
        #[test]
        fn any_packet_is_answered_or_dropped(packet in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600)) {
            let z = zones("192.0.2.1\n198.51.100.0/25\n");
            for t in [Transport::Udp, Transport::Tcp] {
                let r = respond(&z, &packet, t);
                if let Some(bytes) = r.bytes {
                    proptest::prop_assert_eq!(&bytes[..2], &packet[..2]);
                    if t == Transport::Udp {
                        proptest::prop_assert!(bytes.len() <= 1232);
                    }
                }
            }
        }

        /// Queries for any name and type get a well-formed reply.
        #[test]
        fn any_question_gets_a_reply(labels in proptest::collection::vec("[0-9a-z]{1,4}", 0..6), qtype in 0u16..300) {
            let z = zones("192.0.2.1\n198.51.100.0/25\n");
            let mut name = labels.join(".");
            name.push_str(if labels.is_empty() { "bl.test." } else { ".bl.test." });
            let mut m = Message::new();
            m.set_id(9).add_query(Query::query(Name::from_ascii(&name).unwrap(), RecordType::from(qtype)));
            let r = respond(&z, &m.to_vec().unwrap(), Transport::Udp);
            let reply = Message::from_vec(&r.bytes.unwrap()).unwrap();
            proptest::prop_assert_eq!(reply.id(), 9);
            proptest::prop_assert!(reply.authoritative());
        }
    }

    fn arb_query() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let label = prop_oneof![
            (0u8..=255).prop_map(|n| n.to_string()),
            Just("0".to_string()),
            Just("1".to_string()),
            "[a-fA-F0-9]",
            "[a-zA-Z][a-zA-Z0-9]{0,7}",
        ];
        let suffix = prop_oneof![
            Just("bl.test."),
            Just("BL.Test."),
            Just("a.bl.test."),
            Just("example.com."),
            Just("test.")
        ];
        let qtype = prop_oneof![
            Just(RecordType::A),
            Just(RecordType::AAAA),
            Just(RecordType::TXT),
            Just(RecordType::SOA),
            Just(RecordType::NS),
            Just(RecordType::ANY),
            Just(RecordType::MX),
            // OPT (41) is no question type: such queries take the general path.
            (1u16..300)
                .prop_filter("not OPT", |t| *t != 41)
                .prop_map(RecordType::from),
        ];
        (
            proptest::collection::vec(label, 0..6),
            suffix,
            qtype,
            any::<u16>(),
            any::<bool>(),
            prop_oneof![Just(None), (0u16..4096).prop_map(Some)],
            prop_oneof![Just(DNSClass::IN), Just(DNSClass::CH)],
        )
            .prop_map(|(labels, suffix, qtype, id, rd, edns, class)| {
                let mut name = labels.join(".");
                if !name.is_empty() {
                    name.push('.');
                }
                name.push_str(suffix);
                let mut q = Query::query(Name::from_ascii(&name).unwrap(), qtype);
                q.set_query_class(class);
                let mut m = Message::new();
                m.set_id(id).set_recursion_desired(rd).add_query(q);
                if let Some(payload) = edns {
                    let mut e = Edns::new();
                    e.set_max_payload(payload);
                    m.set_edns(e);
                }
                m.to_vec().unwrap()
            })
    }

    fn differential_zones() -> Zones {
        let long = "z".repeat(200);
        let text = format!(
            "$NS 60 ns1.bl.test ns2.bl.test\n:127.0.0.3:listed $\n0.0.0.0/1 :5:wide\n192.0.2.1\n192.0.2.200 :4:a{long}\n\
             192.0.2.200 :6:b{long}\n192.0.2.200 :7:c{long}\n192.0.2.200 :8:d{long}\n198.51.100.0/25\n!198.51.100.7\n"
        );
        Zones::new(vec![
            Arc::new(ZoneData::new(
                zone_name("bl.test").unwrap(),
                Ip4Set::parse(&text),
                1,
                300,
            )),
            Arc::new(ZoneData::new(
                zone_name("a.bl.test").unwrap(),
                Ip4Set::parse("192.0.2.9\n"),
                1,
                300,
            )),
        ])
    }

    fn same_reply(z: &Zones, query: &[u8]) -> (Disposition, bool) {
        let mut out = (Disposition::Dropped, false);
        for t in [Transport::Udp, Transport::Tcp] {
            let fast = fast_respond(z, query, t).expect("a plain query takes the wire path");
            let slow = slow_respond(z, query, t);
            assert_eq!(fast.disposition, slow.disposition);
            assert_eq!(fast.bitmap, slow.bitmap);
            let (f, s) = (fast.bytes.unwrap(), slow.bytes.unwrap());
            let (fm, sm) = (
                Message::from_vec(&f).unwrap(),
                Message::from_vec(&s).unwrap(),
            );
            assert_eq!(fm, sm);
            if t == Transport::Udp {
                assert!(f.len() <= 1232);
                out = (fast.disposition, fm.truncated());
            }
        }
        out
    }

    #[test]
    fn wire_path_matches_the_general_path_on_known_names() {
        let z = differential_zones();
        let mut truncated = 0;
        let mut seen = std::collections::HashSet::new();
        for name in [
            "bl.test.",
            "BL.TEST.",
            "1.2.0.192.bl.test.",
            "200.2.0.192.bl.test.",
            "0.100.51.198.bl.test.",
            "7.100.51.198.bl.test.",
            "1.100.51.198.bl.test.",
            "0.2.0.192.bl.test.",
            "9.2.0.192.a.bl.test.",
            "9.2.0.192.bl.test.",
            "2.0.192.bl.test.",
            "x.bl.test.",
            "1.1.1.1.1.bl.test.",
            "example.com.",
        ] {
            for qtype in [
                RecordType::A,
                RecordType::AAAA,
                RecordType::TXT,
                RecordType::SOA,
                RecordType::NS,
                RecordType::ANY,
                RecordType::MX,
            ] {
                for edns in [None, Some(512), Some(1232), Some(4096)] {
                    let mut m = Message::new();
                    m.set_id(3)
                        .add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
                    if let Some(p) = edns {
                        let mut e = Edns::new();
                        e.set_max_payload(p);
                        m.set_edns(e);
                    }
                    let (d, tc) = same_reply(&z, &m.to_vec().unwrap());
                    truncated += usize::from(tc);
                    seen.insert(format!("{d:?}"));
                }
            }
        }
        assert!(truncated > 0);
        assert_eq!(seen.len(), 4, "{seen:?}");
    }

    proptest::proptest! {
        /// The wire path and the general path give the same reply.
        #[test]
        fn wire_path_matches_the_general_path(query in arb_query()) {
            let z = differential_zones();
            same_reply(&z, &query);
        }
    }

    #[test]
    fn long_txt_is_truncated_over_udp_and_whole_over_tcp() {
        let long = "x".repeat(250);
        let mut text = String::new();
        for i in 0..4 {
            text.push_str(&format!("192.0.2.9 :2:{i}{long}\n"));
        }
        let z = zones(&text);
        let mut m = Message::new();
        m.set_id(1).add_query(Query::query(
            Name::from_ascii("9.2.0.192.bl.test.").unwrap(),
            RecordType::TXT,
        ));
        let bytes = m.to_vec().unwrap();
        let udp = Message::from_vec(&respond(&z, &bytes, Transport::Udp).bytes.unwrap()).unwrap();
        assert!(udp.truncated());
        let tcp = Message::from_vec(&respond(&z, &bytes, Transport::Tcp).bytes.unwrap()).unwrap();
        assert!(!tcp.truncated());
        assert_eq!(tcp.answers().len(), 4);
    }
}
