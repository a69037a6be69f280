//! Random parts of names (run namespaces, cluster names): short, lowercase, without vowels (so no
//! word is spelt by chance) and without the digits and letters that read alike (0/o, 1/l, 3).

/// The characters of a suffix.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A random suffix of `len` characters from [`ALPHABET`], a valid part of a DNS label.
pub fn random_suffix(len: usize) -> String {
    (0..len).map(|_| ALPHABET[fastrand::usize(..ALPHABET.len())] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_dns_label_characters_and_differ() {
        let a = random_suffix(5);
        assert_eq!(a.len(), 5);
        assert!(a.bytes().all(|b| ALPHABET.contains(&b)), "{a}");
        // 27^8 possibilities: two equal draws of 8 mean the generator is not random.
        assert_ne!(random_suffix(8), random_suffix(8));
    }
}
