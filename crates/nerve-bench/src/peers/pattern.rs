//! The payload every system carries: 8-byte words `seed, seed+1, ...` so the client writes
//! every byte of a request and can check every byte of a response against a closed-form
//! sum (no second pass over an expected buffer).

/// Writes the pattern of `seed` over `buf` (its length must be a multiple of 8).
#[inline]
pub fn fill(buf: &mut [u8], seed: u64) {
    // SAFETY: every bit pattern is a valid u64 and a valid u8; align_to_mut splits off
    // whatever part of the buffer is not 8-byte aligned.
    let (head, words, tail) = unsafe { buf.align_to_mut::<u64>() };
    if !head.is_empty() || !tail.is_empty() {
        // unaligned buffer (not the case for shared memory or Vec<u8> in practice)
        for (i, w) in buf.chunks_exact_mut(8).enumerate() {
            w.copy_from_slice(&seed.wrapping_add(i as u64).to_le_bytes());
        }
        return;
    }
    for (i, w) in words.iter_mut().enumerate() {
        *w = seed.wrapping_add(i as u64).to_le();
    }
}

/// Wrapping sum of the little-endian 8-byte words of `buf`.
fn word_sum(buf: &[u8]) -> u64 {
    // SAFETY: as in fill.
    let (head, words, tail) = unsafe { buf.align_to::<u64>() };
    if !head.is_empty() || !tail.is_empty() {
        return buf.chunks_exact(8).fold(0u64, |a, w| {
            a.wrapping_add(u64::from_le_bytes(w.try_into().expect("8 bytes")))
        });
    }
    let mut lanes = [0u64; 8];
    let mut chunks = words.chunks_exact(8);
    for c in &mut chunks {
        for (l, w) in lanes.iter_mut().zip(c) {
            *l = l.wrapping_add(u64::from_le(*w));
        }
    }
    let rest = chunks
        .remainder()
        .iter()
        .fold(0u64, |a, w| a.wrapping_add(u64::from_le(*w)));
    lanes.iter().fold(rest, |a, l| a.wrapping_add(*l))
}

/// Checks that `buf` holds exactly the pattern of `seed` at length `len`: length, first
/// word (catches a stale response) and the wrapping sum of all words.
pub fn verify(buf: &[u8], len: usize, seed: u64) -> Result<(), String> {
    if buf.len() != len {
        return Err(format!("length {} instead of {len}", buf.len()));
    }
    let words = (len / 8) as u64;
    if words == 0 {
        return Ok(());
    }
    let first = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
    if first != seed {
        return Err(format!(
            "first word {first:#x} instead of {seed:#x} (stale or foreign response)"
        ));
    }
    let sum = word_sum(buf);
    // sum of seed + i for i in 0..words
    let expected = words
        .wrapping_mul(seed)
        .wrapping_add(words.wrapping_mul(words.wrapping_sub(1)) / 2);
    if sum != expected {
        return Err(format!("checksum {sum:#x} instead of {expected:#x}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_corruption_length_and_staleness() {
        let mut b = vec![0u8; 4096];
        fill(&mut b, 77);
        verify(&b, 4096, 77).unwrap();
        assert!(verify(&b, 4088, 77).unwrap_err().contains("length"));
        assert!(verify(&b, 4096, 78).unwrap_err().contains("first word"));
        b[1000] ^= 1;
        assert!(verify(&b, 4096, 77).unwrap_err().contains("checksum"));
        // an unaligned view takes the byte-wise path and agrees
        let mut c = vec![0u8; 4096 + 1];
        fill(&mut c[1..], 77);
        verify(&c[1..], 4096, 77).unwrap();
    }
}
