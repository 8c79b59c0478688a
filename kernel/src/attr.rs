//! Netlink attribute reading and writing on top of netlink-packet-core's `NlasIterator`, with
//! errors that say which attribute of which reply was wrong instead of panicking.

use netlink_packet_core::{DefaultNla, Emitable, NlasIterator};

use crate::error::Error;

/// One attribute: type (flags masked off) and value bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr<'a> {
    /// Attribute type without NLA_F_NESTED / NLA_F_NET_BYTEORDER.
    pub kind: u16,
    /// The value, without header or padding.
    pub value: &'a [u8],
}

/// Split `buf` into attributes; `what` names the enclosing message or nest for errors.
pub fn parse<'a>(buf: &'a [u8], what: &str) -> Result<Vec<Attr<'a>>, Error> {
    iter(buf, what).collect()
}

/// The attributes of `buf` one by one, without a vector (a dump of thousands of sockets reads a
/// few attributes of each); `what` names the enclosing message or nest for errors.
pub fn iter<'a, 'w>(
    buf: &'a [u8],
    what: &'w str,
) -> impl Iterator<Item = Result<Attr<'a>, Error>> + use<'a, 'w> {
    NlasIterator::new(buf).map(move |nla| {
        let nla = nla.map_err(|e| Error::malformed(what, format!("bad attribute: {e}")))?;
        let value = nla.value();
        // NlaBuffer::value() borrows from the iterator's buffer; re-slice from `buf` so the
        // returned attribute lives as long as the input.
        let start = value.as_ptr() as usize - buf.as_ptr() as usize;
        Ok(Attr {
            kind: nla.kind(),
            value: &buf[start..start + value.len()],
        })
    })
}

impl<'a> Attr<'a> {
    fn fixed<const N: usize>(&self, what: &str) -> Result<[u8; N], Error> {
        self.value.try_into().map_err(|_| {
            Error::malformed(
                what,
                format!(
                    "attribute {} should hold {N} bytes, holds {}",
                    self.kind,
                    self.value.len()
                ),
            )
        })
    }

    /// A u8 value.
    pub fn u8(&self, what: &str) -> Result<u8, Error> {
        Ok(self.fixed::<1>(what)?[0])
    }

    /// A u16 value in host byte order.
    pub fn u16(&self, what: &str) -> Result<u16, Error> {
        Ok(u16::from_ne_bytes(self.fixed(what)?))
    }

    /// A u32 value in host byte order.
    pub fn u32(&self, what: &str) -> Result<u32, Error> {
        Ok(u32::from_ne_bytes(self.fixed(what)?))
    }

    /// A u64 value in host byte order.
    pub fn u64(&self, what: &str) -> Result<u64, Error> {
        Ok(u64::from_ne_bytes(self.fixed(what)?))
    }

    /// An NLA_UINT: 4 bytes if the value fits in 32 bits, else 8.
    pub fn uint(&self, what: &str) -> Result<u64, Error> {
        match self.value.len() {
            4 => self.u32(what).map(u64::from),
            8 => self.u64(what),
            n => Err(Error::malformed(
                what,
                format!(
                    "attribute {} should hold 4 or 8 bytes, holds {n}",
                    self.kind
                ),
            )),
        }
    }

    /// A u16 the kernel may also send as u32 (e.g. SMC-D CHID).
    pub fn u16_or_u32(&self, what: &str) -> Result<u32, Error> {
        match self.value.len() {
            2 => self.u16(what).map(u32::from),
            _ => self.u32(what),
        }
    }

    /// A string: up to the first NUL (or the whole value), invalid UTF-8 replaced.
    pub fn string(&self) -> String {
        c_string(self.value)
    }

    /// The nested attributes inside this one.
    pub fn nested(&self, what: &str) -> Result<Vec<Attr<'a>>, Error> {
        parse(self.value, what)
    }
}

/// Text of a fixed-size C char array or NUL-terminated string.
pub fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Builds a run of attributes for a request.
#[derive(Debug, Default, Clone)]
pub struct Writer {
    nlas: Vec<DefaultNla>,
}

impl Writer {
    /// An empty attribute list.
    pub fn new() -> Self {
        Writer::default()
    }

    /// Append raw bytes as attribute `kind`.
    pub fn bytes(mut self, kind: u16, value: &[u8]) -> Self {
        self.nlas.push(DefaultNla::new(kind, value.to_vec()));
        self
    }

    /// Append a NUL-terminated string.
    pub fn string(self, kind: u16, value: &str) -> Self {
        let mut v = value.as_bytes().to_vec();
        v.push(0);
        self.bytes(kind, &v)
    }

    /// Append a u8.
    pub fn u8(self, kind: u16, value: u8) -> Self {
        self.bytes(kind, &[value])
    }

    /// Append a u32 in host byte order.
    pub fn u32(self, kind: u16, value: u32) -> Self {
        self.bytes(kind, &value.to_ne_bytes())
    }

    /// The encoded attributes, each padded to 4 bytes.
    pub fn finish(self) -> Vec<u8> {
        let mut out = vec![0u8; self.nlas.as_slice().buffer_len()];
        self.nlas.as_slice().emit(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_and_parser_agree() {
        let buf = Writer::new()
            .string(2, "rxe_lo")
            .u8(3, 1)
            .u32(4, 0xdead_beef)
            .finish();
        assert_eq!(buf.len() % 4, 0);
        let attrs = parse(&buf, "t").unwrap();
        assert_eq!(attrs.len(), 3);
        assert_eq!(attrs[0].string(), "rxe_lo");
        assert_eq!(attrs[1].u8("t").unwrap(), 1);
        assert_eq!(attrs[2].u32("t").unwrap(), 0xdead_beef);
        assert!(attrs[2].u64("t").is_err());
        assert_eq!(attrs[2].uint("t").unwrap(), 0xdead_beef);
    }

    #[test]
    fn bad_lengths_are_errors() {
        // declared length 12 but only 8 bytes present
        let buf = [12u8, 0, 1, 0, 0, 0, 0, 0];
        assert!(parse(&buf, "t").is_err());
        // declared length below the header size
        let buf = [2u8, 0, 1, 0];
        assert!(parse(&buf, "t").is_err());
        // a dangling partial header
        let buf = [8u8, 0, 1, 0, 5, 0, 0, 0, 1, 0];
        assert!(parse(&buf, "t").is_err());
    }

    #[test]
    fn nested_flag_is_masked() {
        let buf = [8u8, 0, 0x07, 0x80, 1, 2, 3, 4];
        let a = parse(&buf, "t").unwrap();
        assert_eq!(a[0].kind, 7);
    }

    #[test]
    fn c_string_stops_at_nul() {
        assert_eq!(c_string(b"mlx5_0\0\0garbage"), "mlx5_0");
        assert_eq!(c_string(b"abc"), "abc");
    }
}
