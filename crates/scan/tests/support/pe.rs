//! A writer of small PE images with an import table (PE32 or PE32+), and the
//! string ClamAV hashes for their `.imp` signatures, worked out independently of
//! the scanner from ClamAV's documentation of the import hash. Also used by the
//! scanner's unit tests (through `#[path]`), so it needs nothing but `std`.

/// One imported function: by name or by ordinal.
#[derive(Debug, Clone, Copy)]
pub enum Func {
    Name(&'static str),
    Ordinal(u16),
}

/// How to write the import table.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// A 64-bit image (8-byte thunks).
    pub plus: bool,
    /// Give each DLL an import lookup table (`OriginalFirstThunk`); without it
    /// only the address table (`FirstThunk`) names the functions.
    pub lookup_table: bool,
    /// Count the null descriptor that ends the directory in its size, as linkers do.
    pub count_null: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            plus: false,
            lookup_table: true,
            count_null: true,
        }
    }
}

const IDATA_RVA: u32 = 0x2000;
const IDATA_RAW: u32 = 0x600;

fn put16(f: &mut [u8], at: usize, v: u16) {
    f[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(f: &mut [u8], at: usize, v: u32) {
    f[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// The `.idata` section's bytes (placed at [`IDATA_RVA`]) and the import
/// directory's size.
fn idata(imports: &[(&str, &[Func])], o: Options) -> (Vec<u8>, u32) {
    let thunk = if o.plus { 8 } else { 4 };
    let idt = (imports.len() + 1) * 20;
    let mut sec = vec![0u8; idt];
    let mut descs = Vec::new();
    for (dll, funcs) in imports {
        // Hint/name entries first, then the DLL name, then the two thunk arrays.
        let mut thunks = Vec::new();
        for f in *funcs {
            let v: u64 = match f {
                Func::Ordinal(n) => u64::from(*n) | if o.plus { 1 << 63 } else { 1 << 31 },
                Func::Name(name) => {
                    if sec.len() % 2 == 1 {
                        sec.push(0);
                    }
                    let rva = IDATA_RVA + sec.len() as u32;
                    sec.extend_from_slice(&[0, 0]);
                    sec.extend_from_slice(name.as_bytes());
                    sec.push(0);
                    u64::from(rva)
                }
            };
            thunks.push(v);
        }
        thunks.push(0);
        let name_rva = IDATA_RVA + sec.len() as u32;
        sec.extend_from_slice(dll.as_bytes());
        sec.push(0);
        while !sec.len().is_multiple_of(8) {
            sec.push(0);
        }
        let table = |sec: &mut Vec<u8>| {
            let rva = IDATA_RVA + sec.len() as u32;
            for t in &thunks {
                sec.extend_from_slice(&t.to_le_bytes()[..thunk]);
            }
            rva
        };
        let lookup = table(&mut sec);
        let address = table(&mut sec);
        descs.push((if o.lookup_table { lookup } else { 0 }, name_rva, address));
    }
    for (i, (lookup, name, address)) in descs.into_iter().enumerate() {
        let d = i * 20;
        put32(&mut sec, d, lookup);
        put32(&mut sec, d + 12, name);
        put32(&mut sec, d + 16, address);
    }
    let size = if o.count_null { idt } else { idt - 20 };
    (sec, size as u32)
}

/// A PE image: 0x400 bytes of headers, a `.text` section (the entry point), an
/// `.idata` section holding the import table, and a `.data` section of 0x400
/// bytes so that every name lies well before the end of the file (ClamAV leaves
/// out a function whose name is in the last 258 bytes).
pub fn pe_with_imports(imports: &[(&str, &[Func])], o: Options) -> Vec<u8> {
    let (idata, dir_size) = idata(imports, o);
    let idata_size = idata.len().div_ceil(0x200) * 0x200;
    let data_raw = IDATA_RAW as usize + idata_size;
    let data_rva = IDATA_RVA + (idata_size as u32).div_ceil(0x1000) * 0x1000;
    let mut f = vec![0u8; data_raw + 0x400];
    f[..2].copy_from_slice(b"MZ");
    put32(&mut f, 0x3c, 0x80);
    f[0x80..0x84].copy_from_slice(b"PE\0\0");
    put16(&mut f, 0x84, if o.plus { 0x8664 } else { 0x14c });
    put16(&mut f, 0x86, 3);
    let (opt_size, fixed) = if o.plus { (240, 112) } else { (224, 96) };
    put16(&mut f, 0x94, opt_size);
    put16(&mut f, 0x96, if o.plus { 0x0022 } else { 0x0102 });
    let h = 0x98;
    put16(&mut f, h, if o.plus { 0x20b } else { 0x10b });
    put32(&mut f, h + 16, 0x1000); // entry point
    if o.plus {
        f[h + 24..h + 32].copy_from_slice(&0x1_4000_0000u64.to_le_bytes());
    } else {
        put32(&mut f, h + 28, 0x40_0000);
    }
    put32(&mut f, h + 32, 0x1000);
    put32(&mut f, h + 36, 0x200);
    put16(&mut f, h + 40, 4);
    put16(&mut f, h + 48, 4);
    put32(&mut f, h + 56, data_rva + 0x1000); // image size
    put32(&mut f, h + 60, 0x400); // headers size
    put16(&mut f, h + 68, 2);
    put32(&mut f, h + fixed - 4, 16);
    put32(&mut f, h + fixed + 8, IDATA_RVA);
    put32(&mut f, h + fixed + 12, dir_size);
    let table = h + opt_size as usize;
    let sections: [(&[u8], u32, u32, u32, u32); 3] = [
        (b".text", 0x1000, 0x200, 0x400, 0x6000_0020),
        (
            b".idata",
            IDATA_RVA,
            idata_size as u32,
            IDATA_RAW,
            0xc000_0040,
        ),
        (b".data", data_rva, 0x400, data_raw as u32, 0xc000_0040),
    ];
    for (i, (name, rva, size, raw, chars)) in sections.into_iter().enumerate() {
        let s = table + i * 40;
        f[s..s + name.len()].copy_from_slice(name);
        put32(&mut f, s + 8, size);
        put32(&mut f, s + 12, rva);
        put32(&mut f, s + 16, size);
        put32(&mut f, s + 20, raw);
        put32(&mut f, s + 36, chars);
    }
    f[0x400] = 0xc3; // ret
    f[IDATA_RAW as usize..IDATA_RAW as usize + idata.len()].copy_from_slice(&idata);
    f
}

/// The names ClamAV documents for the ordinals these tests import (Winsock and
/// OLE Automation); any other ordinal is `ord<N>`.
fn ordinal(dll: &str, n: u16) -> String {
    let dll = dll.to_ascii_lowercase();
    let known = match (dll.as_str(), n) {
        ("ws2_32.dll" | "wsock32.dll", 1) => Some("accept"),
        ("ws2_32.dll" | "wsock32.dll", 3) => Some("closesocket"),
        ("ws2_32.dll" | "wsock32.dll", 23) => Some("socket"),
        ("ws2_32.dll" | "wsock32.dll", 115) => Some("WSAStartup"),
        ("oleaut32.dll", 2) => Some("SysAllocString"),
        ("oleaut32.dll", 6) => Some("SysFreeString"),
        _ => None,
    };
    known.map_or_else(|| format!("ord{n}"), str::to_string)
}

/// The string ClamAV hashes for these imports: `dll.function` for each
/// function, comma-separated, lowercased, the DLL name cut at its first dot
/// when `.dll`, `.ocx` or `.sys` follows it.
pub fn import_string(imports: &[(&str, &[Func])]) -> String {
    let mut parts = Vec::new();
    for (dll, funcs) in imports {
        let stem = match dll.find('.') {
            Some(dot)
                if [".dll", ".ocx", ".sys"]
                    .iter()
                    .any(|e| dll[dot..].to_ascii_lowercase().starts_with(e)) =>
            {
                &dll[..dot]
            }
            _ => dll,
        };
        for f in *funcs {
            let name = match f {
                Func::Name(n) => n.to_string(),
                Func::Ordinal(n) => ordinal(dll, *n),
            };
            parts.push(format!("{stem}.{name}").to_ascii_lowercase());
        }
    }
    parts.join(",")
}
