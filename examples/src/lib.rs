//! Helpers shared by the examples: argument parsing of common flags and checksums.

use std::time::Duration;

/// FNV-1a over bytes: a cheap checksum that catches torn or stale payloads.
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for chunk in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h ^= u64::from_le_bytes(w);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Fills `data` with a pattern that depends on `seq`, and stores the checksum of
/// everything before the last 8 bytes in those bytes.
pub fn fill_cloud(data: &mut [u8], seq: u64) {
    let n = data.len().saturating_sub(8);
    let mut x = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for chunk in data[..n].chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
    let c = checksum(&data[..n]);
    data[n..].copy_from_slice(&c.to_le_bytes());
}

/// Verifies a payload written by [`fill_cloud`].
pub fn verify_cloud(data: &[u8]) -> bool {
    if data.len() < 8 {
        return false;
    }
    let n = data.len() - 8;
    checksum(&data[..n]).to_le_bytes() == data[n..]
}

/// Sleeps until `start + period * k`, absolute, so rates do not drift.
pub fn sleep_until_tick(start: std::time::Instant, period: Duration, k: u64) {
    let next = start + period.mul_f64(k as f64);
    if let Some(d) = next.checked_duration_since(std::time::Instant::now()) {
        std::thread::sleep(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloud_checksum_detects_corruption() {
        let mut d = vec![0u8; 1000];
        fill_cloud(&mut d, 7);
        assert!(verify_cloud(&d));
        d[10] ^= 1;
        assert!(!verify_cloud(&d));
    }
}
