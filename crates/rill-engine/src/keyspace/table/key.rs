//! A key's name as the key table stores it: up to 22 bytes in the item itself, a longer one in
//! an allocation of exactly its length. Most names are short (`user:1234`, `orders:42`), so
//! most keys cost no allocation for their name, and the handle is 24 bytes (a `Bytes` is 32
//! and its buffer one more allocation).

/// The longest name kept inline.
const INLINE: usize = 22;

/// A key's name, inline when short.
#[derive(Clone, PartialEq, Eq)]
pub struct CompactKey(Repr);

#[derive(Clone, PartialEq, Eq)]
enum Repr {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl CompactKey {
    /// A copy of `name`.
    pub fn new(name: &[u8]) -> CompactKey {
        match u8::try_from(name.len()) {
            Ok(len) if name.len() <= INLINE => {
                let mut bytes = [0u8; INLINE];
                if let Some(dst) = bytes.get_mut(..name.len()) {
                    dst.copy_from_slice(name);
                }
                CompactKey(Repr::Inline { len, bytes })
            }
            _ => CompactKey(Repr::Heap(name.into())),
        }
    }
}

impl std::ops::Deref for CompactKey {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or_default(),
            Repr::Heap(b) => b,
        }
    }
}

impl AsRef<[u8]> for CompactKey {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::fmt::Debug for CompactKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", bytes::Bytes::copy_from_slice(self))
    }
}

#[cfg(test)]
mod tests {
    use super::CompactKey;

    #[test]
    fn names_of_every_length_read_back() {
        assert_eq!(std::mem::size_of::<CompactKey>(), 24);
        for n in [0, 1, 21, 22, 23, 255, 256, 10_000] {
            let name: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
            assert_eq!(&*CompactKey::new(&name), &name[..], "length {n}");
        }
    }
}
