//! Handlers registered by name: async functions or closures over a [`JobContext`].

use foldhash::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::JobContext;
use crate::error::{Error, Result};

/// What a handler returns: `Ok` is a successful run (200); an `Err` fails it (500) with the
/// error's text.
pub type JobResult = std::result::Result<(), anyhow::Error>;

type RunFn = dyn Fn(JobContext) -> BoxFuture<'static, JobResult> + Send + Sync;
type HookFn = dyn Fn() + Send + Sync;

/// One registered handler with its optional lifecycle hooks.
#[derive(Clone)]
pub struct Handler {
    run: Arc<RunFn>,
    init: Option<Arc<HookFn>>,
    destroy: Option<Arc<HookFn>>,
}

impl Handler {
    /// A handler from an async function or closure.
    pub fn new<F, Fut>(f: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        Handler {
            run: Arc::new(move |ctx| f(ctx).boxed()),
            init: None,
            destroy: None,
        }
    }

    /// Runs `hook` when a worker for a job using this handler starts.
    pub fn with_init(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.init = Some(Arc::new(hook));
        self
    }

    /// Runs `hook` when such a worker stops.
    pub fn with_destroy(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.destroy = Some(Arc::new(hook));
        self
    }

    /// Starts one run.
    pub fn call(&self, ctx: JobContext) -> BoxFuture<'static, JobResult> {
        (self.run)(ctx)
    }

    /// Calls the init hook, if any.
    pub fn init(&self) {
        if let Some(h) = &self.init {
            h();
        }
    }

    /// Calls the destroy hook, if any.
    pub fn destroy(&self) {
        if let Some(h) = &self.destroy {
            h();
        }
    }
}

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handler")
    }
}

/// Handlers by name. A name registered twice is an error.
#[derive(Clone, Debug, Default)]
pub struct HandlerRegistry {
    map: HashMap<String, Handler>,
}

impl HandlerRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a handler under `name`.
    pub fn register(&mut self, name: impl Into<String>, handler: Handler) -> Result<&mut Self> {
        let name = name.into();
        if self.map.contains_key(&name) {
            return Err(Error::DuplicateHandler { name });
        }
        self.map.insert(name, handler);
        Ok(self)
    }

    /// Registers an async function or closure under `name`.
    pub fn register_fn<F, Fut>(&mut self, name: impl Into<String>, f: F) -> Result<&mut Self>
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        self.register(name, Handler::new(f))
    }

    /// The handler registered under `name`.
    pub fn get(&self, name: &str) -> Option<&Handler> {
        self.map.get(name)
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.map.keys().cloned().collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Registering a second handler under a name already taken is an error naming it.
    #[test]
    fn duplicate_names_are_refused() {
        let mut r = HandlerRegistry::new();
        r.register_fn("a", |_ctx| async { Ok(()) }).expect("first");
        let e = r.register_fn("a", |_ctx| async { Ok(()) }).unwrap_err();
        assert!(matches!(e, Error::DuplicateHandler { ref name } if name == "a"));
        assert_eq!(r.names(), vec!["a".to_string()]);
    }
}
