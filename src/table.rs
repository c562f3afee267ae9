//! A table of values by name, sorted, in one allocation: the tensors of a model header and of a
//! `.wdelta` header. Millions of entries must not cost many times the header's own size, as a
//! tree of heap strings would; names up to 24 bytes are stored inline.

/// A name in a [`NameTable`].
pub(crate) type Name = compact_str::CompactString;

/// Values by name, sorted by the names' bytes; looked up by binary search. A value's position
/// in name order is stable and may index other tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameTable<V> {
    entries: Vec<(Name, V)>,
}

impl<V> Default for NameTable<V> {
    fn default() -> Self {
        NameTable {
            entries: Vec::new(),
        }
    }
}

impl<V> NameTable<V> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sorts `entries` by name. Err holds the first name (in sorted order) that occurs twice.
    pub fn from_unique(mut entries: Vec<(Name, V)>) -> Result<Self, Name> {
        // In place: a stable sort would allocate half the table again.
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        if let Some(pair) = entries.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(pair[0].0.clone());
        }
        Ok(NameTable { entries })
    }

    /// From entries in any order; a name given twice keeps its last entry (as a JSON object or
    /// a map does).
    pub fn from_unsorted(mut entries: Vec<(Name, V)>) -> Self {
        if !entries.windows(2).all(|w| w[0].0 < w[1].0) {
            sort_keeping_last(&mut entries);
        }
        entries.shrink_to_fit();
        NameTable { entries }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The position of `name` in name order.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.entries
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
    }

    pub fn get(&self, name: &str) -> Option<&V> {
        self.position(name).map(|i| &self.entries[i].1)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    /// The entry at `position` in name order.
    pub fn get_index(&self, position: usize) -> Option<(&str, &V)> {
        self.entries.get(position).map(|(n, v)| (n.as_str(), v))
    }

    /// Adds or replaces an entry; returns the value it replaced.
    pub fn insert(&mut self, name: impl Into<Name>, value: V) -> Option<V> {
        let name = name.into();
        match self
            .entries
            .binary_search_by(|(n, _)| n.as_str().cmp(name.as_str()))
        {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (name, value));
                None
            }
        }
    }

    /// Names and values in name order.
    pub fn iter(&self) -> Iter<'_, V> {
        Iter {
            inner: self.entries.iter(),
        }
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

/// Sorts by name with a stable permutation of positions (4 bytes an entry, where sorting the
/// entries themselves would take scratch memory of half their size), then drops all but the
/// last of each name.
fn sort_keeping_last<V>(items: &mut Vec<(Name, V)>) {
    let mut order: Vec<u32> = (0..items.len() as u32).collect();
    order.sort_by(|&a, &b| items[a as usize].0.cmp(&items[b as usize].0));
    // Position i receives the element at order[i]: follow each cycle once.
    const DONE: u32 = u32::MAX;
    for i in 0..order.len() {
        if order[i] == DONE {
            continue;
        }
        let mut j = i;
        loop {
            let src = order[j] as usize;
            order[j] = DONE;
            if src == i {
                break;
            }
            items.swap(j, src);
            j = src;
        }
    }
    // Equal names are now in input order; `dedup_by` keeps the first of a run, so move each
    // later entry into the kept place.
    items.dedup_by(|later, kept| {
        if later.0 == kept.0 {
            std::mem::swap(later, kept);
            true
        } else {
            false
        }
    });
}

/// See [`NameTable::iter`].
#[derive(Debug, Clone)]
pub struct Iter<'a, V> {
    inner: std::slice::Iter<'a, (Name, V)>,
}

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = (&'a str, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(n, v)| (n.as_str(), v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<V> DoubleEndedIterator for Iter<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back().map(|(n, v)| (n.as_str(), v))
    }
}

impl<V> ExactSizeIterator for Iter<'_, V> {}

impl<'a, V> IntoIterator for &'a NameTable<V> {
    type Item = (&'a str, &'a V);
    type IntoIter = Iter<'a, V>;

    fn into_iter(self) -> Iter<'a, V> {
        self.iter()
    }
}

impl<V> std::ops::Index<&str> for NameTable<V> {
    type Output = V;

    fn index(&self, name: &str) -> &V {
        self.get(name).expect("no entry of that name")
    }
}

impl<N: Into<Name>, V> FromIterator<(N, V)> for NameTable<V> {
    /// Later entries replace earlier ones of the same name, as in a map.
    fn from_iter<I: IntoIterator<Item = (N, V)>>(iter: I) -> Self {
        NameTable::from_unsorted(iter.into_iter().map(|(n, v)| (n.into(), v)).collect())
    }
}

impl<N: Into<Name>, V> From<std::collections::BTreeMap<N, V>> for NameTable<V> {
    fn from(map: std::collections::BTreeMap<N, V>) -> Self {
        map.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_entries_win_as_in_a_map_and_duplicates_are_named() {
        let table: NameTable<u32> = [("b", 1), ("a", 2), ("b", 3)].into_iter().collect();
        assert_eq!(table.iter().collect::<Vec<_>>(), vec![("a", &2), ("b", &3)]);
        assert_eq!(table.position("b"), Some(1));
        assert_eq!(table["a"], 2);
        let dup = NameTable::from_unique(vec![(Name::from("x"), 1), (Name::from("x"), 2)]);
        assert_eq!(dup.unwrap_err(), "x");
    }
}
