//! LEAST_RECENTLY_USED: a per-job access order; new addresses join as newest, absent ones are
//! dropped, the eldest is picked and becomes the newest.

/// One job's access order as indexes into the list, eldest first, and that list.
#[derive(Default)]
pub(super) struct Order(
    std::collections::VecDeque<String>,
    Vec<String>,
    std::collections::VecDeque<usize>,
);

impl Order {
    pub(super) fn pick(&mut self, addresses: &[String]) -> usize {
        if self.1.as_slice() != addresses {
            // the list changed: keep the order of the addresses still present, append new ones
            let now: std::collections::HashSet<&String> = addresses.iter().collect();
            self.0.retain(|a| now.contains(a));
            let known: std::collections::HashSet<String> = self.0.iter().cloned().collect();
            for a in addresses {
                if !known.contains(a) {
                    self.0.push_back(a.clone());
                }
            }
            let index: std::collections::HashMap<&String, usize> =
                addresses.iter().enumerate().map(|(i, a)| (a, i)).collect();
            self.2 = self
                .0
                .iter()
                .map(|a| index.get(a).copied().unwrap_or(0))
                .collect();
            self.1 = addresses.to_vec();
        }
        // unchanged list: rotate the eldest to newest without touching the strings
        let (Some(eldest), Some(i)) = (self.0.pop_front(), self.2.pop_front()) else {
            return 0;
        };
        self.0.push_back(eldest);
        self.2.push_back(i);
        i
    }
}
