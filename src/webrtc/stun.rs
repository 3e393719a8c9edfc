//! Just enough STUN (RFC 8489) to route a binding request: the local ufrag in its USERNAME.

/// STUN's magic cookie.
const MAGIC: [u8; 4] = [0x21, 0x12, 0xa4, 0x42];
const USERNAME: u16 = 0x0006;

/// The local ufrag (before the colon of USERNAME, `local:remote` as ICE writes it) of a STUN
/// message, `None` when `data` is not STUN or names no user.
pub fn local_ufrag(data: &[u8]) -> Option<&str> {
    // Type (top two bits zero), length (a multiple of 4), the cookie, the transaction id.
    if data.len() < 20 || data[0] & 0xc0 != 0 || data[4..8] != MAGIC {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([data[2], data[3]]));
    let mut attrs = data.get(20..20 + len)?;
    while attrs.len() >= 4 {
        let kind = u16::from_be_bytes([attrs[0], attrs[1]]);
        let alen = usize::from(u16::from_be_bytes([attrs[2], attrs[3]]));
        let value = attrs.get(4..4 + alen)?;
        if kind == USERNAME {
            let user = std::str::from_utf8(value).ok()?;
            return user.split(':').next().filter(|u| !u.is_empty());
        }
        let padded = (4 + alen).div_ceil(4) * 4;
        attrs = attrs.get(padded..)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_request_username() {
        let mut m = vec![0x00, 0x01, 0, 0];
        m.extend_from_slice(&MAGIC);
        m.extend_from_slice(&[7; 12]);
        // PRIORITY (4 bytes), then USERNAME "abcd:xyz" (8 bytes).
        m.extend_from_slice(&[0x00, 0x24, 0, 4, 1, 2, 3, 4]);
        m.extend_from_slice(&[0x00, 0x06, 0, 8]);
        m.extend_from_slice(b"abcd:xyz");
        let len = (m.len() - 20) as u16;
        m[2..4].copy_from_slice(&len.to_be_bytes());
        assert_eq!(local_ufrag(&m), Some("abcd"));
        assert_eq!(local_ufrag(&m[..30]), None, "truncated");
        assert_eq!(local_ufrag(&[0x80; 40]), None, "RTP is not STUN");
    }
}
