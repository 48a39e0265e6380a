//! The payload every system carries: 8-byte words `seed, seed+1, ...` so the client writes
//! every byte of a request and can check every byte of a response against a closed-form
//! sum (no second pass over an expected buffer).

/// Writes the pattern of `seed` over `buf` (its length must be a multiple of 8).
#[inline]
pub fn fill(buf: &mut [u8], seed: u64) {
    for (i, w) in buf.chunks_exact_mut(8).enumerate() {
        w.copy_from_slice(&seed.wrapping_add(i as u64).to_le_bytes());
    }
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
    let mut lanes = [0u64; 8];
    let mut chunks = buf.chunks_exact(64);
    for c in &mut chunks {
        for (l, w) in lanes.iter_mut().zip(c.chunks_exact(8)) {
            *l = l.wrapping_add(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
    }
    let mut sum = lanes.iter().fold(0u64, |a, l| a.wrapping_add(*l));
    for w in chunks.remainder().chunks_exact(8) {
        sum = sum.wrapping_add(u64::from_le_bytes(w.try_into().expect("8 bytes")));
    }
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
    }
}
