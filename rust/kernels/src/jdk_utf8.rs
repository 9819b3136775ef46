//! The JDK's UTF-8 decoder, `new String(bytes, UTF_8)`, malformed input included: the Java
//! clients' keys are strings, so their hashes see the string a key's bytes decode to.

use std::borrow::Cow;

/// The UTF-8 bytes of the string a key's bytes stand for in Java, `new String(bytes,
/// UTF_8).getBytes(UTF_8)`: valid UTF-8 as it is, malformed sequences replaced by U+FFFD as
/// the JDK replaces them (`java_decode_utf8`). The Pulsar client's keys are strings, so its
/// `Murmur3_32Hash` hashes these bytes, as its `JavaStringHash` hashes that string's units.
pub fn java_utf8(bytes: &[u8]) -> Cow<'_, [u8]> {
    if std::str::from_utf8(bytes).is_ok() {
        return Cow::Borrowed(bytes);
    }
    let mut units = Vec::with_capacity(bytes.len());
    java_decode_utf8(bytes, |u| units.push(u));
    // The JDK's decoder pairs every surrogate it puts out, so nothing here is replaced.
    let text: String = char::decode_utf16(units)
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect();
    Cow::Owned(text.into_bytes())
}

const REPLACEMENT: u16 = 0xFFFD;

#[inline]
fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// E0 followed by 80..9F is an overlong 3-byte form.
#[inline]
fn is_malformed3_2(b1: u8, b2: u8) -> bool {
    (b1 == 0xE0 && b2 & 0xE0 == 0x80) || !is_continuation(b2)
}

/// F0 followed by 80..8F is overlong, F4 by 90..BF beyond U+10FFFF.
#[inline]
fn is_malformed4_2(b1: u8, b2: u8) -> bool {
    (b1 == 0xF0 && !(0x90..=0xBF).contains(&b2))
        || (b1 == 0xF4 && b2 & 0xF0 != 0x80)
        || !is_continuation(b2)
}

/// Decodes UTF-8 to UTF-16 units as the JDK's `String(byte[], UTF_8)` does
/// (`String.decodeUTF8_UTF16` with replacement). It differs from Python's and Rust's
/// lossy decoders on malformed input: an encoded surrogate (ED A0..BF xx) is one U+FFFD
/// for its three bytes, and a truncated sequence at the end is one U+FFFD.
pub fn java_decode_utf8(src: &[u8], mut put: impl FnMut(u16)) {
    let sl = src.len();
    let mut sp = 0;
    while sp < sl {
        let b1 = src[sp];
        sp += 1;
        if b1 < 0x80 {
            put(u16::from(b1));
        } else if b1 >> 5 == 0b110 && b1 & 0x1E != 0 {
            if sp < sl {
                let b2 = src[sp];
                if is_continuation(b2) {
                    sp += 1;
                    put(u16::from(b1 & 0x1F) << 6 | u16::from(b2 & 0x3F));
                } else {
                    put(REPLACEMENT);
                }
                continue;
            }
            put(REPLACEMENT);
            break;
        } else if b1 >> 4 == 0b1110 {
            if sp + 1 < sl {
                let (b2, b3) = (src[sp], src[sp + 1]);
                if is_malformed3_2(b1, b2) || !is_continuation(b3) {
                    put(REPLACEMENT);
                    // The JDK's `malformed3`: skip b2 too when it began a valid pair.
                    sp += usize::from(!is_malformed3_2(b1, b2));
                } else {
                    sp += 2;
                    let c = u16::from(b1 & 0x0F) << 12
                        | u16::from(b2 & 0x3F) << 6
                        | u16::from(b3 & 0x3F);
                    put(if (0xD800..=0xDFFF).contains(&c) {
                        REPLACEMENT
                    } else {
                        c
                    });
                }
                continue;
            }
            put(REPLACEMENT);
            if sp < sl && is_malformed3_2(b1, src[sp]) {
                continue;
            }
            break;
        } else if b1 >> 3 == 0b11110 {
            if sp + 2 < sl {
                let (b2, b3, b4) = (src[sp], src[sp + 1], src[sp + 2]);
                let uc = u32::from(b1 & 0x07) << 18
                    | u32::from(b2 & 0x3F) << 12
                    | u32::from(b3 & 0x3F) << 6
                    | u32::from(b4 & 0x3F);
                let well_formed = is_continuation(b2)
                    && is_continuation(b3)
                    && is_continuation(b4)
                    && (0x1_0000..0x11_0000).contains(&uc);
                if well_formed {
                    sp += 3;
                    let v = uc - 0x1_0000;
                    put(0xD800 | (v >> 10) as u16);
                    put(0xDC00 | (v & 0x3FF) as u16);
                } else {
                    put(REPLACEMENT);
                    // The JDK's `malformed4`: how many bytes the malformed sequence spans.
                    if !(b1 > 0xF4 || is_malformed4_2(b1, b2)) {
                        sp += if is_continuation(b3) { 2 } else { 1 };
                    }
                }
                continue;
            }
            put(REPLACEMENT);
            if b1 > 0xF4 || (sp < sl && is_malformed4_2(b1, src[sp])) {
                continue;
            }
            sp += 1;
            if sp < sl && !is_continuation(src[sp]) {
                continue;
            }
            break;
        } else {
            put(REPLACEMENT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_utf8_replaces_as_the_jdk_does() {
        const R: &[u8] = "\u{FFFD}".as_bytes();
        assert_eq!(java_utf8(b"order-1"), &b"order-1"[..]);
        assert!(matches!(java_utf8("€uro".as_bytes()), Cow::Borrowed(_)));
        assert_eq!(java_utf8(b"\xff"), R);
        // An encoded surrogate is one U+FFFD for its three bytes, as the JDK decodes it.
        assert_eq!(java_utf8(b"\xED\xA0\x80a"), [R, b"a"].concat());
        assert_eq!(java_utf8(b"\x80\xFF"), [R, R].concat());
    }

    fn java_units(bytes: &[u8]) -> Vec<u16> {
        let mut units = vec![];
        java_decode_utf8(bytes, |u| units.push(u));
        units
    }

    #[test]
    fn java_decoding_replaces_as_the_jdk_does() {
        const R: u16 = REPLACEMENT;
        // An encoded surrogate: one replacement for its three bytes (Python gives three).
        assert_eq!(java_units(b"\xED\xA0\x80a"), [R, 0x61]);
        // Truncated sequences at the end: one replacement.
        assert_eq!(java_units(b"a\xE2\x82"), [0x61, R]);
        assert_eq!(java_units(b"\xF0\x9F\x98"), [R]);
        assert_eq!(java_units(b"\xC3"), [R]);
        // A bad continuation: the lead byte alone is replaced.
        assert_eq!(java_units(b"\xC3A"), [R, 0x41]);
        assert_eq!(java_units(b"\xE2\x82A"), [R, 0x41]);
        // Overlong forms, lone continuations, and bytes that never occur.
        assert_eq!(java_units(b"\xC0\xAF"), [R, R]);
        assert_eq!(java_units(b"\xE0\x80\xAF"), [R, R, R]);
        assert_eq!(java_units(b"\xF0\x80\x80\xAF"), [R, R, R, R]);
        assert_eq!(java_units(b"\x80\xFF"), [R, R]);
        // Beyond U+10FFFF.
        assert_eq!(java_units(b"\xF4\x90\x80\x80"), [R, R, R, R]);
        assert_eq!(java_units("\u{10FFFF}".as_bytes()), [0xDBFF, 0xDFFF]);
    }
}
