//! The Luhn checksum.

/// Tells whether `number` passes the Luhn checksum: spaces are ignored,
/// any other character that is not an ASCII digit makes it invalid, and
/// so do fewer than two digits.
pub fn is_valid(number: &str) -> bool {
    let mut sum = 0;
    let mut digits = 0;
    for c in number.chars().rev().filter(|c| *c != ' ') {
        let Some(d) = c.to_digit(10) else {
            return false;
        };
        let d = if digits % 2 == 1 { d * 2 } else { d };
        sum += if d > 9 { d - 9 } else { d };
        digits += 1;
    }
    digits > 1 && sum % 10 == 0
}

#[cfg(test)]
mod tests {
    use super::is_valid;

    #[test]
    fn valid() {
        assert!(is_valid("4539 3195 0343 6467"));
        assert!(is_valid("059"));
    }

    #[test]
    fn invalid() {
        assert!(!is_valid("8273 1232 7352 0569"));
        assert!(!is_valid("0"));
        assert!(!is_valid(" "));
        assert!(!is_valid("055-444-285"));
    }
}
