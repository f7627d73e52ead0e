//! The checksum a DUMP payload ends with: CRC-64 with the Jones polynomial, reflected input
//! and output, initial value 0, no final xor (what Redis calls `crc64`, check value
//! `0xe9c6d914c4b8d9ca` for `"123456789"`). Table-driven, one byte per step: payloads are small
//! and a DUMP already costs O(size of the value).

/// The Jones polynomial in reflected (LSB-first) form.
const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

const TABLE: [u64; 256] = build_table();

// Indexing in a const fn is checked at compile time: `i < 256` by the loop bound.
#[allow(clippy::indexing_slicing)]
const fn build_table() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ POLY_REFLECTED } else { crc >> 1 };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// Continue a CRC over `bytes` (start with `crc = 0`).
pub fn crc64(mut crc: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        let slot = (crc ^ u64::from(b)) & 0xff;
        // `slot` < 256 by the mask, so the lookup cannot miss.
        crc = TABLE.get(slot as usize).copied().unwrap_or(0) ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    #[test]
    fn check_value() {
        assert_eq!(super::crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        let (a, b) = b"123456789".split_at(4);
        assert_eq!(super::crc64(super::crc64(0, a), b), 0xe9c6_d914_c4b8_d9ca);
    }
}
