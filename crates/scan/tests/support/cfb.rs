//! A small writer of OLE2 compound files ([MS-CFB] version 3: 512-byte sectors,
//! streams under 4096 bytes in the mini stream) and of VBA projects in them
//! ([MS-OVBA], module source compressed with literal tokens only).

/// A directory entry to write.
pub enum Node {
    Stream(&'static str, Vec<u8>),
    Storage(&'static str, Vec<Node>),
}

const END: u32 = 0xffff_fffe;
const FREE: u32 = 0xffff_ffff;
const FATSECT: u32 = 0xffff_fffd;

struct Flat {
    name: String,
    kind: u8,
    child: u32,
    right: u32,
    data: Vec<u8>,
    start: u32,
}

fn flatten(nodes: &[Node], out: &mut Vec<Flat>) -> u32 {
    // Siblings chained through their right pointers.
    let mut first = FREE;
    let mut prev: Option<usize> = None;
    for n in nodes {
        let idx = out.len();
        let (name, kind, data) = match n {
            Node::Stream(name, d) => (*name, 2, d.clone()),
            Node::Storage(name, _) => (*name, 1, Vec::new()),
        };
        out.push(Flat {
            name: name.into(),
            kind,
            child: FREE,
            right: FREE,
            data,
            start: END,
        });
        if let Node::Storage(_, kids) = n {
            out[idx].child = flatten(kids, out);
        }
        match prev {
            Some(p) => out[p].right = idx as u32,
            None => first = idx as u32,
        }
        prev = Some(idx);
    }
    first
}

/// A compound file whose root storage holds `nodes`.
pub fn cfb(nodes: &[Node]) -> Vec<u8> {
    let mut e = vec![Flat {
        name: "Root Entry".into(),
        kind: 5,
        child: FREE,
        right: FREE,
        data: Vec::new(),
        start: END,
    }];
    e[0].child = flatten(nodes, &mut e);
    // The mini stream: small streams in 64-byte mini sectors.
    let mut mini = Vec::new();
    let mut minifat: Vec<u32> = Vec::new();
    for f in e.iter_mut().skip(1) {
        if f.kind == 2 && !f.data.is_empty() && f.data.len() < 4096 {
            let n = f.data.len().div_ceil(64);
            f.start = minifat.len() as u32;
            for k in 0..n {
                let next = minifat.len() as u32 + 1;
                minifat.push(if k + 1 == n { END } else { next });
            }
            mini.extend_from_slice(&f.data);
            mini.resize(minifat.len() * 64, 0);
        }
    }
    let sectors = |len: usize| len.div_ceil(512);
    let dir_sectors = sectors(e.len() * 128);
    let minifat_sectors = sectors(minifat.len() * 4);
    let mini_sectors = sectors(mini.len());
    let big: usize = e
        .iter()
        .skip(1)
        .filter(|f| f.kind == 2 && f.data.len() >= 4096)
        .map(|f| sectors(f.data.len()))
        .sum();
    let others = dir_sectors + minifat_sectors + mini_sectors + big;
    let mut fat_sectors = 1;
    while fat_sectors * 128 < fat_sectors + others {
        fat_sectors += 1;
    }
    assert!(fat_sectors <= 109, "too big for the header's DIFAT");
    let mut fat = vec![FATSECT; fat_sectors];
    let mut body: Vec<u8> = Vec::new();
    let chain = |fat: &mut Vec<u32>, body: &mut Vec<u8>, data: &[u8]| -> u32 {
        if data.is_empty() {
            return END;
        }
        let start = fat.len() as u32;
        let n = sectors(data.len());
        for k in 0..n {
            let next = fat.len() as u32 + 1;
            fat.push(if k + 1 == n { END } else { next });
        }
        body.extend_from_slice(data);
        body.resize((fat.len() - fat_sectors) * 512, 0);
        start
    };
    let minifat_bytes: Vec<u8> = minifat.iter().flat_map(|v| v.to_le_bytes()).collect();
    let minifat_start = chain(&mut fat, &mut body, &minifat_bytes);
    e[0].start = chain(&mut fat, &mut body, &mini);
    e[0].data = vec![0; mini.len()];
    for f in e.iter_mut().skip(1) {
        if f.kind == 2 && f.data.len() >= 4096 {
            f.start = chain(&mut fat, &mut body, &f.data);
        }
    }
    let mut dir = Vec::new();
    for f in &e {
        let mut d = [0u8; 128];
        for (j, u) in f.name.encode_utf16().enumerate() {
            d[2 * j..2 * j + 2].copy_from_slice(&u.to_le_bytes());
        }
        d[64..66].copy_from_slice(&((f.name.encode_utf16().count() as u16 + 1) * 2).to_le_bytes());
        d[66] = f.kind;
        d[67] = 1; // black
        d[68..72].copy_from_slice(&FREE.to_le_bytes());
        d[72..76].copy_from_slice(&f.right.to_le_bytes());
        d[76..80].copy_from_slice(&f.child.to_le_bytes());
        d[116..120].copy_from_slice(&f.start.to_le_bytes());
        d[120..124].copy_from_slice(&(f.data.len() as u32).to_le_bytes());
        dir.extend_from_slice(&d);
    }
    let dir_start = chain(&mut fat, &mut body, &dir);
    fat.resize(fat_sectors * 128, FREE);
    let mut h = vec![0u8; 512];
    h[..8].copy_from_slice(&[0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);
    h[24..26].copy_from_slice(&0x3eu16.to_le_bytes());
    h[26..28].copy_from_slice(&3u16.to_le_bytes());
    h[28..30].copy_from_slice(&0xfffeu16.to_le_bytes());
    h[30..32].copy_from_slice(&9u16.to_le_bytes());
    h[32..34].copy_from_slice(&6u16.to_le_bytes());
    h[44..48].copy_from_slice(&(fat_sectors as u32).to_le_bytes());
    h[48..52].copy_from_slice(&dir_start.to_le_bytes());
    h[56..60].copy_from_slice(&4096u32.to_le_bytes());
    h[60..64].copy_from_slice(&minifat_start.to_le_bytes());
    h[64..68].copy_from_slice(&(minifat_sectors as u32).to_le_bytes());
    h[68..72].copy_from_slice(&END.to_le_bytes());
    for i in 0..109 {
        let v = if i < fat_sectors { i as u32 } else { FREE };
        h[76 + 4 * i..80 + 4 * i].copy_from_slice(&v.to_le_bytes());
    }
    let mut out = h;
    out.extend(fat.iter().flat_map(|v| v.to_le_bytes()));
    out.extend_from_slice(&body);
    out
}

/// MS-OVBA compression (§2.4.1.3.6) with a greedy search for copy tokens, so
/// that a 4096-byte chunk of repetitive text fits in a compressed chunk, as
/// Office writes them (ClamAV misreads raw chunks, and compressed chunks that
/// end short of 4096 bytes before the last).
pub fn ovba_compress(data: &[u8]) -> Vec<u8> {
    let mut out = vec![1u8];
    for chunk in data.chunks(4096) {
        let mut body = Vec::new();
        let mut p = 0;
        while p < chunk.len() {
            let flag_at = body.len();
            body.push(0u8);
            for bit in 0..8 {
                if p >= chunk.len() {
                    break;
                }
                // §2.4.1.3.19.1: the offset/length split depends on p.
                let bits = if p == 0 {
                    4
                } else {
                    (usize::BITS - (p - 1).leading_zeros()).max(4)
                };
                let max_len = (0xffffusize >> bits) + 3;
                let max_off = (1usize << bits).min(p);
                let (mut best_len, mut best_off) = (0, 0);
                for off in 1..=max_off {
                    let mut n = 0;
                    while n < max_len && p + n < chunk.len() && chunk[p + n - off] == chunk[p + n] {
                        n += 1;
                    }
                    if n > best_len {
                        (best_len, best_off) = (n, off);
                    }
                }
                if best_len >= 3 {
                    let token = (((best_off - 1) << (16 - bits)) | (best_len - 3)) as u16;
                    body.extend_from_slice(&token.to_le_bytes());
                    body[flag_at] |= 1 << bit;
                    p += best_len;
                } else {
                    body.push(chunk[p]);
                    p += 1;
                }
            }
        }
        assert!(body.len() + 2 <= 4098, "test text does not compress");
        out.extend_from_slice(&(0xb000u16 | (body.len() + 2 - 3) as u16).to_le_bytes());
        out.extend_from_slice(&body);
    }
    out
}

fn rec(d: &mut Vec<u8>, id: u16, data: &[u8]) {
    d.extend_from_slice(&id.to_le_bytes());
    d.extend_from_slice(&(data.len() as u32).to_le_bytes());
    d.extend_from_slice(data);
}

fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
}

/// Bytes of performance cache written before each module's compressed source.
pub const MODULE_OFFSET: usize = 32;

/// The `dir` stream of a project with `modules` (MS-OVBA §2.3.4.2), uncompressed.
fn dir_stream(modules: &[(&str, &[u8])]) -> Vec<u8> {
    let mut d = Vec::new();
    rec(&mut d, 0x0001, &1u32.to_le_bytes()); // SysKind: 32-bit Windows
    rec(&mut d, 0x0002, &0x409u32.to_le_bytes());
    rec(&mut d, 0x0014, &0x409u32.to_le_bytes());
    rec(&mut d, 0x0003, &1252u16.to_le_bytes());
    rec(&mut d, 0x0004, b"VBAProject");
    rec(&mut d, 0x0005, b"");
    rec(&mut d, 0x0040, b"");
    rec(&mut d, 0x0006, b"");
    rec(&mut d, 0x003d, b"");
    rec(&mut d, 0x0007, &0u32.to_le_bytes());
    rec(&mut d, 0x0008, &0u32.to_le_bytes());
    // PROJECTVERSION: the size field is a reserved 4 over 6 bytes of data.
    d.extend_from_slice(&0x0009u16.to_le_bytes());
    d.extend_from_slice(&4u32.to_le_bytes());
    d.extend_from_slice(&1u32.to_le_bytes());
    d.extend_from_slice(&0u16.to_le_bytes());
    rec(&mut d, 0x000c, b"");
    rec(&mut d, 0x003c, b"");
    rec(&mut d, 0x000f, &(modules.len() as u16).to_le_bytes());
    rec(&mut d, 0x0013, &0xffffu16.to_le_bytes());
    for (name, _) in modules {
        rec(&mut d, 0x0019, name.as_bytes());
        rec(&mut d, 0x0047, &utf16(name));
        rec(&mut d, 0x001a, name.as_bytes());
        rec(&mut d, 0x0032, &utf16(name));
        rec(&mut d, 0x001c, b"");
        rec(&mut d, 0x0048, b"");
        rec(&mut d, 0x0031, &(MODULE_OFFSET as u32).to_le_bytes());
        rec(&mut d, 0x001e, &0u32.to_le_bytes());
        rec(&mut d, 0x002c, &0xffffu16.to_le_bytes());
        rec(&mut d, 0x0021, b"");
        rec(&mut d, 0x002b, b"");
    }
    rec(&mut d, 0x0010, b"");
    d
}

/// The `VBA` storage of a project with `modules` (name, source), and the
/// `PROJECT` stream that goes beside it.
pub fn vba_project(modules: &[(&'static str, &[u8])]) -> (Node, Node) {
    let mut kids = vec![
        // _VBA_PROJECT (§2.3.4.1): reserved 0x61CC, version 0xFFFF (no cache).
        Node::Stream("_VBA_PROJECT", vec![0xcc, 0x61, 0xff, 0xff, 0, 0, 0]),
        Node::Stream("dir", ovba_compress(&dir_stream(modules))),
    ];
    for (name, source) in modules {
        let mut s = vec![0u8; MODULE_OFFSET];
        s.extend_from_slice(&ovba_compress(source));
        kids.push(Node::Stream(name, s));
    }
    let mut project = String::from("ID=\"{00000000-0000-0000-0000-000000000000}\"\r\n");
    for (name, _) in modules {
        project.push_str(&format!("Module={name}\r\n"));
    }
    project.push_str("Name=\"VBAProject\"\r\n");
    (
        Node::Storage("VBA", kids),
        Node::Stream("PROJECT", project.into_bytes()),
    )
}

/// A Word 97-2003 shaped document: a `WordDocument` stream holding `text`, and
/// with `modules`, a `Macros` storage with the VBA project.
pub fn word_doc(text: &[u8], modules: &[(&'static str, &[u8])]) -> Vec<u8> {
    let mut root = vec![Node::Stream("WordDocument", text.to_vec())];
    if !modules.is_empty() {
        let (vba, project) = vba_project(modules);
        root.push(Node::Storage("Macros", vec![project, vba]));
    }
    cfb(&root)
}

/// A `vbaProject.bin` as in an OOXML `.docm`: the VBA storage and `PROJECT`
/// at the root.
pub fn vba_project_bin(modules: &[(&'static str, &[u8])]) -> Vec<u8> {
    let (vba, project) = vba_project(modules);
    cfb(&[project, vba])
}
