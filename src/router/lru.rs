//! LEAST_RECENTLY_USED: a per-job access order; new addresses join as newest, absent ones are
//! dropped, the eldest is picked and becomes the newest.

/// One job's access order, eldest first.
#[derive(Default)]
pub(super) struct Order(Vec<String>);

impl Order {
    pub(super) fn pick(&mut self, addresses: &[String]) -> usize {
        self.0.retain(|a| addresses.contains(a));
        for a in addresses {
            if !self.0.contains(a) {
                self.0.push(a.clone());
            }
        }
        let eldest = self.0.remove(0);
        let i = addresses.iter().position(|a| *a == eldest).unwrap_or(0);
        self.0.push(eldest);
        i
    }
}
