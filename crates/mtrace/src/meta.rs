//! Names: the process-wide function registry and the metadata region writer.
//!
//! Function ids are handed out once per process (interned by name, file,
//! line and module), so a call site keeps its id across recordings. A new
//! recording starts by writing every function already known; a function
//! registered while a recording runs is written into it at once. Both happen
//! under the registry lock, so each recording names every function exactly
//! once. A recording that names functions on use (`Config::names_on_use`)
//! starts with none: [`name`] writes a function into it the first time the
//! instrumentation asks, once (the registry remembers the last file each
//! function was named in).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use mtrace_format::{FunctionId, FunctionMeta, MetaRecord};

use crate::shared::{current, lock, Reading, Shared};

#[derive(Default)]
struct Registry {
    functions: Vec<FunctionMeta>,
    ids: HashMap<(String, String, u32, String), FunctionId>,
    /// Per function, the generation of the last file it was named in by
    /// [`name`] or at its registration (0: none).
    named_in: Vec<u64>,
}

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(Mutex::default);

/// Returns the id of a function, registering it (and naming it in the running
/// recording) the first time. Ids start at 1.
pub(crate) fn register(name: &str, file: &str, line: u32, module: &str) -> FunctionId {
    let mut registry = lock(&REGISTRY);
    let key = (name.to_owned(), file.to_owned(), line, module.to_owned());
    if let Some(&id) = registry.ids.get(&key) {
        return id;
    }
    let id = FunctionId(registry.functions.len() as u32 + 1);
    let meta = FunctionMeta {
        id,
        name: key.0.clone(),
        file: key.1.clone(),
        line,
        module: key.3.clone(),
    };
    let reading = Reading::begin();
    let mut named_in = 0;
    if let Some(shared) = current(&reading) {
        shared.write_meta(&MetaRecord::Function(meta.clone()));
        named_in = shared.gen;
    }
    registry.named_in.push(named_in);
    registry.functions.push(meta);
    registry.ids.insert(key, id);
    id
}

/// Runs `f` under the registry lock, after writing every known function into
/// `shared`'s metadata region (none if it names them on use). `f`
/// publishes the recording.
pub(crate) fn publish(shared: &Shared, f: impl FnOnce()) {
    // The host first: a trace says where it was recorded (one record).
    shared.write_meta(&MetaRecord::Host {
        name: crate::process::host_name().to_owned(),
    });
    let registry = lock(&REGISTRY);
    if !shared.names_on_use {
        for meta in &registry.functions {
            shared.write_meta(&MetaRecord::Function(meta.clone()));
        }
    }
    f();
}

/// Names `id` in the running recording if it names functions on use and
/// has not named it yet (see `crate::name_function`).
pub(crate) fn name(id: FunctionId) {
    let reading = Reading::begin();
    let Some(shared) = current(&reading) else {
        return;
    };
    if !shared.names_on_use {
        return;
    }
    let mut registry = lock(&REGISTRY);
    let Some(at) = (id.0 as usize).checked_sub(1) else {
        return;
    };
    if registry
        .named_in
        .get(at)
        .is_none_or(|&gen| gen == shared.gen)
    {
        return;
    }
    if let Some(meta) = registry.functions.get(at) {
        shared.write_meta(&MetaRecord::Function(meta.clone()));
        registry.named_in[at] = shared.gen;
    }
}
