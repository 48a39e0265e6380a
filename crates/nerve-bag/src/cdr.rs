//! Little-endian CDR (XCDR1, the encoding ROS 2 and its MCAP files use): a writer and a
//! checked reader. Alignment is relative to the body, after the 4-byte encapsulation
//! header; 8-byte types align to 8.

use crate::BagError;

/// The encapsulation header of little-endian plain CDR.
pub const CDR_LE: [u8; 4] = [0x00, 0x01, 0x00, 0x00];

/// Appends CDR to a buffer.
pub struct CdrWriter<'a> {
    buf: &'a mut Vec<u8>,
    base: usize,
}

impl<'a> CdrWriter<'a> {
    /// Clears `buf` and writes the encapsulation header.
    pub fn new(buf: &'a mut Vec<u8>) -> CdrWriter<'a> {
        buf.clear();
        buf.extend_from_slice(&CDR_LE);
        CdrWriter { buf, base: 4 }
    }

    /// Pads with zeros to a multiple of `n` from the body start.
    pub fn align(&mut self, n: usize) {
        let pad = (n - (self.buf.len() - self.base) % n) % n;
        if pad > 0 {
            self.buf.resize(self.buf.len() + pad, 0);
        }
    }

    /// Raw bytes, unaligned.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// A `uint8` (or `bool`, `byte`, `char`).
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// A `uint32`.
    pub fn u32(&mut self, v: u32) {
        self.align(4);
        self.bytes(&v.to_le_bytes());
    }

    /// An `int32`.
    pub fn i32(&mut self, v: i32) {
        self.align(4);
        self.bytes(&v.to_le_bytes());
    }

    /// A `float32`.
    pub fn f32(&mut self, v: f32) {
        self.align(4);
        self.bytes(&v.to_le_bytes());
    }

    /// A `float64`.
    pub fn f64(&mut self, v: f64) {
        self.align(8);
        self.bytes(&v.to_le_bytes());
    }

    /// Consecutive `float64`s (a fixed array or a run of fields): aligned once.
    pub fn f64s(&mut self, v: &[f64]) {
        self.align(8);
        self.buf.reserve(v.len() * 8);
        for x in v {
            self.buf.extend_from_slice(&x.to_le_bytes());
        }
    }

    /// A `string`: length with its NUL, the bytes, the NUL.
    pub fn string(&mut self, s: &[u8]) {
        self.u32(s.len() as u32 + 1);
        self.bytes(s);
        self.u8(0);
    }

    /// A sequence length.
    pub fn len(&mut self, n: usize) -> Result<(), BagError> {
        let n = u32::try_from(n).map_err(|_| BagError::Convert {
            what: "sequence".into(),
            reason: format!("{n} elements exceed CDR's 32-bit length"),
        })?;
        self.u32(n);
        Ok(())
    }

    /// Bytes written so far (header included).
    pub fn written(&self) -> usize {
        self.buf.len()
    }
}

/// Reads CDR, refusing what runs past the end or breaks the format.
pub struct CdrReader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> CdrReader<'a> {
    /// Checks the encapsulation header (little-endian plain CDR only).
    pub fn new(data: &'a [u8]) -> Result<CdrReader<'a>, BagError> {
        match data.get(..4) {
            Some(h) if h[..2] == CDR_LE[..2] => Ok(CdrReader { data, pos: 4 }),
            Some(h) => Err(malformed(format!(
                "encapsulation {:02x}{:02x} is not little-endian plain CDR",
                h[0], h[1]
            ))),
            None => Err(malformed("shorter than its 4-byte header".into())),
        }
    }

    /// Skips padding to a multiple of `n` from the body start.
    pub fn align(&mut self, n: usize) -> Result<(), BagError> {
        let pad = (n - (self.pos - 4) % n) % n;
        self.take(pad).map(|_| ())
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], BagError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        let Some(end) = end else {
            return Err(malformed(format!(
                "needs {n} bytes at offset {}, has {}",
                self.pos,
                self.data.len() - self.pos
            )));
        };
        let b = &self.data[self.pos..end];
        self.pos = end;
        Ok(b)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], BagError> {
        self.align(N.min(8))?;
        Ok(self.take(N)?.try_into().expect("length checked"))
    }

    /// A `uint8`.
    pub fn u8(&mut self) -> Result<u8, BagError> {
        Ok(self.take(1)?[0])
    }

    /// A `uint32`.
    pub fn u32(&mut self) -> Result<u32, BagError> {
        self.array().map(u32::from_le_bytes)
    }

    /// An `int32`.
    pub fn i32(&mut self) -> Result<i32, BagError> {
        self.array().map(i32::from_le_bytes)
    }

    /// A `float32`.
    pub fn f32(&mut self) -> Result<f32, BagError> {
        self.array().map(f32::from_le_bytes)
    }

    /// A `float64`.
    pub fn f64(&mut self) -> Result<f64, BagError> {
        self.array().map(f64::from_le_bytes)
    }

    /// A `string`, without its NUL.
    pub fn string(&mut self) -> Result<&'a [u8], BagError> {
        let n = self.u32()? as usize;
        if n == 0 {
            return Ok(&[]);
        }
        let s = self.take(n)?;
        Ok(&s[..n - 1])
    }

    /// A sequence length, checked against the bytes left for elements of `elem_size`.
    pub fn len(&mut self, elem_size: usize) -> Result<usize, BagError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(elem_size.max(1)) > self.data.len() - self.pos {
            return Err(malformed(format!(
                "sequence of {n} elements at offset {} runs past the end",
                self.pos
            )));
        }
        Ok(n)
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }
}

fn malformed(reason: String) -> BagError {
    BagError::Convert {
        what: "CDR payload".into(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_is_relative_to_the_body() {
        let mut buf = Vec::new();
        let mut w = CdrWriter::new(&mut buf);
        w.u8(1);
        w.f64(2.0);
        w.string(b"ab");
        assert_eq!(buf.len(), 4 + 8 + 8 + 4 + 3);
        let mut r = CdrReader::new(&buf).unwrap();
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.f64().unwrap(), 2.0);
        assert_eq!(r.string().unwrap(), b"ab");
        assert_eq!(r.remaining(), 0);
        assert!(r.u8().is_err());
    }

    #[test]
    fn lies_are_refused() {
        let mut buf = Vec::new();
        CdrWriter::new(&mut buf).u32(1 << 30);
        assert!(CdrReader::new(&buf).unwrap().len(1).is_err());
        assert!(CdrReader::new(&[0, 0, 0, 0]).is_err());
        assert!(CdrReader::new(&[0, 1]).is_err());
    }
}
