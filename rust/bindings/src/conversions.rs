//! The basic conversions of a Python argument to what a kernel takes, as self-converting
//! argument types: each type implements [`FromArg`], and `arg::<Offset>(obj, "offset")`
//! converts the argument called `offset`, failing with a message that names it (and the
//! index, for an item of a batch). PyO3's own `FromPyObject` cannot name the argument of a
//! ValueError, so the name travels with the call. Integer arrays are read in `arrays`; an
//! argument that is one of the module's classes, or made of them, is read beside its class.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use numpy::{Element, PyArray1};
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyString};
use strum::VariantNames;

use crate::errors::{invalid, invalid_at, wrong_type, wrong_type_at, At, Raise};
use keyshared_kernels::buckets::{ring_hash, validate_splits};
use keyshared_kernels::cursor::MAX_OFFSET;
use keyshared_kernels::dispatch::entry_bucket::Route;
use keyshared_kernels::hashing::SegmentHalf;
use keyshared_kernels::parallel::default_threads;
use keyshared_kernels::pending_acks::batch_count;
use keyshared_kernels::redelivery::{check_position, Position};
use keyshared_kernels::routing_key::RoutingKey;

/// A type that converts itself from a Python argument called `name`.
pub trait FromArg<'py>: Sized {
    fn from_arg(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Self>;
}

/// The argument `obj`, called `name`, as a `T`.
pub fn arg<'py, T: FromArg<'py>>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<T> {
    T::from_arg(obj, name)
}

/// An optional argument: absent or None is None.
pub fn opt_arg<'py, T: FromArg<'py>>(
    obj: Option<&Bound<'py, PyAny>>,
    name: &str,
) -> PyResult<Option<T>> {
    match obj {
        Some(o) if !o.is_none() => arg(o, name).map(Some),
        _ => Ok(None),
    }
}

/// An argument with a default: absent is `default`; anything given, None included, is
/// converted.
pub fn arg_or<'py, T: FromArg<'py>>(
    obj: Option<&Bound<'py, PyAny>>,
    name: &str,
    default: T,
) -> PyResult<T> {
    obj.map_or(Ok(default), |o| arg(o, name))
}

/// Declares a newtype argument and how it converts: `convert(obj, name)` gives its value.
macro_rules! argument {
    ($(#[$doc:meta])* $name:ident($inner:ty) = $convert:expr) => {
        $(#[$doc])*
        pub struct $name(pub $inner);

        impl<'py> $crate::conversions::FromArg<'py> for $name {
            fn from_arg(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Self> {
                let convert: fn(&Bound<'py, PyAny>, &str) -> PyResult<$inner> = $convert;
                convert(obj, name).map($name)
            }
        }
    };
}
pub(crate) use argument;

/// The bytes of a `str` (UTF-8) or `bytes` key.
pub fn key_bytes<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<&'a [u8]> {
    key_bytes_in(obj, At::arg(what))
}

/// `key_bytes` for item `index` of a batch of keys.
pub fn key_bytes_at<'a>(obj: &'a Bound<'_, PyAny>, index: usize) -> PyResult<&'a [u8]> {
    key_bytes_in(obj, At::item("keys", index))
}

fn key_bytes_in<'a>(obj: &'a Bound<'_, PyAny>, at: At<'_>) -> PyResult<&'a [u8]> {
    if let Ok(s) = obj.cast::<PyString>() {
        s.to_str()
            .map(str::as_bytes)
            .map_err(|e| invalid_at(at, format!("{at} is not valid text: {e}")))
    } else if let Ok(b) = obj.cast::<PyBytes>() {
        Ok(b.as_bytes())
    } else {
        Err(wrong_type_at(
            at,
            format!("{at} must be str or bytes, got {}", type_name(obj)),
        ))
    }
}

argument!(
    /// A `str` argument as Rust text; lone surrogates are refused by name.
    Text(String) = |obj, what| {
        let text = obj.cast::<PyString>().map_err(|_| {
            wrong_type(format!("{what} must be a str, got {}", type_name(obj)))
        })?;
        key_bytes(text.as_any(), what).map(|b| String::from_utf8_lossy(b).into_owned())
    }
);

/// `err` with `prefix` (where it happened) put before its message, keeping TypeError a
/// TypeError (an `ArgumentTypeError`); any other error becomes an `InvalidArgument`.
pub fn prefixed(err: PyErr, prefix: &str) -> PyErr {
    Python::attach(|py| {
        let message = format!("{prefix} {}", err.value(py));
        if err.is_instance_of::<PyTypeError>(py) {
            wrong_type(message)
        } else {
            invalid(message)
        }
    })
}

/// The argument `obj`, called `what`, as an instance of the native class `T`; anything else
/// is an `ArgumentTypeError` naming the argument (PyO3's own extraction would raise a bare
/// TypeError).
pub fn instance<'a, 'py, T: pyo3::PyClass>(
    obj: &'a Bound<'py, PyAny>,
    what: &str,
) -> PyResult<&'a Bound<'py, T>> {
    obj.cast::<T>().map_err(|_| {
        let class = obj
            .py()
            .get_type::<T>()
            .name()
            .map_or_else(|_| "?".to_owned(), |n| n.to_string());
        wrong_type(format!("{what} must be a {class}, got {}", type_name(obj)))
    })
}

pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// Whether `obj` is an int: a Python int but bool, or what stands for one by `__index__`
/// (a NumPy integer scalar; str, bytes, floats and NumPy's bool have no `__index__`).
/// `bool` is an `int` subclass, but `True` as an id or a hash is a mistake, not a 1.
pub fn is_int(obj: &Bound<'_, PyAny>) -> bool {
    !obj.is_instance_of::<PyBool>()
        && (obj.is_instance_of::<PyInt>()
            || obj.hasattr(intern!(obj.py(), "__index__")).unwrap_or(false))
}

/// The one reading of an int argument, as `T`: anything but an int ([`is_int`]) is an
/// `ArgumentTypeError`, and an int `T` cannot hold is `out_of_range()`, which gives the
/// bounds of the argument at hand.
pub fn int_in<'py, T>(
    obj: &Bound<'py, PyAny>,
    at: At<'_>,
    out_of_range: impl FnOnce() -> PyErr,
) -> PyResult<T>
where
    T: for<'a> FromPyObject<'a, 'py, Error = PyErr>,
{
    if !is_int(obj) {
        return Err(wrong_type_at(
            at,
            format!("{at} must be an int, got {}", type_name(obj)),
        ));
    }
    obj.extract::<T>().map_err(
        |err| match err.is_instance_of::<PyOverflowError>(obj.py()) {
            true => out_of_range(),
            false => err,
        },
    )
}

/// An int argument as i64, the `long` of the Java APIs the library follows.
pub fn int_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<i64> {
    int_at(obj, At::arg(what))
}

/// [`int_arg`] of an argument or of one item of a batch argument.
pub fn int_at(obj: &Bound<'_, PyAny>, at: At<'_>) -> PyResult<i64> {
    int_in(obj, at, || {
        invalid_at(
            at,
            format!("{at} = {obj} is outside the range of a long ([-2**63, 2**63 - 1])"),
        )
    })
}

argument!(
    /// An integer argument (anything with `__index__`, not a bool) as i64; a non-integer is a
    /// TypeError, an integer beyond i64 a ValueError.
    Int(i64) = int_arg
);

argument!(
    /// A `bool` argument; an int or anything else is a mistake, not a truth value.
    Flag(bool) = |obj, what| {
        obj.cast::<PyBool>()
            .map(|b| b.is_true())
            .map_err(|_| wrong_type(format!("{what} must be a bool, got {}", type_name(obj))))
    }
);

argument!(
    /// A 16-bit ring hash.
    RingHash(u16) = |obj, what| ring_hash(int_arg(obj, what)?, what).py()
);

argument!(
    /// Ascending bucket split points from any sequence of ints.
    Splits(Vec<u16>) = |obj, what| {
        validate_splits(&each(obj, what, "a sequence of ints", int_arg)?).py()
    }
);

argument!(
    /// The thread count of a batch call, at least 1; see [`Threads::or_default`].
    Threads(usize) = |obj, what| {
        let n = int_arg(obj, what)?;
        match usize::try_from(n) {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(invalid(format!("{what} must be at least 1, got {n}"))),
        }
    }
);

impl Threads {
    /// The `threads` argument of a batch call; None means the process-wide default.
    pub fn or_default(threads: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
        Ok(opt_arg::<Threads>(threads, "threads")?.map_or_else(default_threads, |t| t.0))
    }
}

argument!(
    /// The process-wide default thread count: 0 for one per core, or more.
    DefaultThreads(usize) = |obj, what| {
        let n = int_arg(obj, what)?;
        usize::try_from(n).map_err(|_| {
            invalid(format!("{what} must be 0 (one per core) or more, got {n}"))
        })
    }
);
argument!(
    /// A consumer id: an int in `[0, 2**64 - 1]`.
    ConsumerId(u64) = consumer_value
);

fn consumer_value(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    int_in(obj, At::arg(what), || {
        invalid_at(
            At::arg(what),
            format!("{what} must be in [0, 2**64 - 1], got {obj}"),
        )
    })
}

argument!(
    /// A segment id: an int in `[0, 2**64 - 1]`.
    SegmentId(u64) = consumer_value
);

/// A bucket of a segment: `(segment_id, bucket)`.
pub fn segment_bucket(
    segment_id: &Bound<'_, PyAny>,
    bucket: &Bound<'_, PyAny>,
) -> PyResult<(u64, u32)> {
    Ok((
        arg::<SegmentId>(segment_id, "segment_id")?.0,
        arg::<Count>(bucket, "bucket")?.0,
    ))
}

/// A non-negative int up to `max`, as u64; a plain int that fits i64 is read without the
/// wider conversion.
fn bounded_value(obj: &Bound<'_, PyAny>, what: &str, max: u64, bound: &str) -> PyResult<u64> {
    let out_of_range = || {
        invalid_at(
            At::arg(what),
            format!("{what} must be in [0, {bound}], got {obj}"),
        )
    };
    let plain = obj.is_exact_instance_of::<PyInt>();
    let value = match plain.then(|| obj.extract::<i64>().ok()).flatten() {
        Some(v) => i128::from(v),
        None => int_in::<i128>(obj, At::arg(what), out_of_range)?,
    };
    u64::try_from(value)
        .ok()
        .filter(|&v| v <= max)
        .ok_or_else(out_of_range)
}

argument!(
    /// A log offset: an int in `[0, 2**63 - 1]`.
    Offset(u64) = |obj, what| bounded_value(obj, what, MAX_OFFSET, "2**63 - 1")
);

argument!(
    /// A time in milliseconds: an int in `[0, 2**63 - 1]`.
    Millis(u64) = |obj, what| bounded_value(obj, what, i64::MAX as u64, "2**63 - 1")
);

argument!(
    /// A count: an int in `[0, 2**32 - 1]`.
    Count(u32) = |obj, what| Ok(bounded_value(obj, what, u64::from(u32::MAX), "2**32 - 1")? as u32)
);

argument!(
    /// A 32-bit key hash: an int in `[0, 0xffffffff]`.
    KeyHash(u32) = |obj, what| Ok(bounded_value(obj, what, u64::from(u32::MAX), "0xffffffff")? as u32)
);

argument!(
    /// A size or a limit: an int in `[0, 2**63 - 1]`, as usize.
    Size(usize) = |obj, what| {
        let value = int_arg(obj, what)?;
        usize::try_from(value)
            .map_err(|_| invalid(format!("{what} must not be negative, got {value}")))
    }
);

argument!(
    /// A ledger or entry id the redelivery queue can hold: an int in `[0, 2**63 - 1]`.
    QueuedId(i64) = |obj, what| Ok(bounded_value(obj, what, i64::MAX as u64, "2**63 - 1")? as i64)
);

argument!(
    /// A sticky key hash that is set: an int in `[1, 65535]` (0 means "not set").
    StickyKeyHash(u16) = |obj, what| {
        let value = int_arg(obj, what)?;
        u16::try_from(value).ok().filter(|&h| h != 0).ok_or_else(|| {
            invalid(format!("{what} must be in [1, 65535], got {value}"))
        })
    }
);

argument!(
    /// A batch size, or a count of a batch's acked indexes: an int in `[0, 2**31 - 1]`.
    BatchSize(i32) = |obj, what| batch_count(int_arg(obj, what)?, what).py()
);

/// A pending ack's `(ledger_id, entry_id)` position.
pub fn position(ledger_id: &Bound<'_, PyAny>, entry_id: &Bound<'_, PyAny>) -> PyResult<(i64, i64)> {
    Ok((
        arg::<Int>(ledger_id, "ledger_id")?.0,
        arg::<Int>(entry_id, "entry_id")?.0,
    ))
}

/// A position the redelivery controller queues: both ids non-negative.
pub fn queued_position(
    ledger_id: &Bound<'_, PyAny>,
    entry_id: &Bound<'_, PyAny>,
) -> PyResult<Position> {
    check_position(position(ledger_id, entry_id)?, "position").py()
}

/// What an entry is dispatched by: exactly one of its stamped `entry_hash_min` and its `key`.
pub fn route<'a>(
    entry_hash_min: Option<&'a Bound<'_, PyAny>>,
    key: Option<&'a Bound<'_, PyAny>>,
) -> PyResult<Route<'a>> {
    match (
        entry_hash_min.filter(|h| !h.is_none()),
        key.filter(|k| !k.is_none()),
    ) {
        (Some(h), None) => Ok(Route::Stamped(arg::<RingHash>(h, "entry_hash_min")?.0)),
        (None, Some(k)) => Ok(Route::Key(key_bytes(k, "key")?)),
        _ => Err(wrong_type(
            "give exactly one of entry_hash_min (stamped entry) and key",
        )),
    }
}

/// The variant of an enum the kernels name, given as a Python str: a TypeError for another
/// type, a ValueError for text that does not encode or names no variant.
pub fn named_arg<E: FromStr + VariantNames>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<E> {
    let name = obj
        .cast::<PyString>()
        .map_err(|_| wrong_type(format!("{what} must be a str, got {}", type_name(obj))))?;
    let name = name
        .to_str()
        .map_err(|e| invalid(format!("{what} is not valid text: {e}")))?;
    named(what, name)
}

/// The variant of an enum the kernels name, by its name; else a ValueError listing the names.
pub fn named<E: FromStr + VariantNames>(what: &str, name: &str) -> PyResult<E> {
    name.parse().map_err(|_| {
        let quoted: Vec<String> = E::VARIANTS.iter().map(|v| format!("\"{v}\"")).collect();
        let (last, rest) = quoted.split_last().expect("an enum has variants");
        invalid(format!(
            "{what} must be {} or {last}, got {name:?}",
            rest.join(", ")
        ))
    })
}

/// A scalable-topic `pulsar_version` (a str such as `"5.0.0-M1"`), with its release's
/// segment rule. `keyshared.versions` holds the library's one list of releases and checks
/// it, so that every entry point accepts and refuses the same names with the same words.
pub struct ScalableRelease {
    pub half: SegmentHalf,
    pub name: String,
}

impl<'py> FromArg<'py> for ScalableRelease {
    fn from_arg(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Self> {
        let py = obj.py();
        let versions = py.import(intern!(py, "keyshared.versions"))?;
        let half: String = versions
            .call_method1(intern!(py, "segment_half"), (obj, what))?
            .extract()?;
        Ok(Self {
            half: named(what, &half)?,
            name: obj.extract()?,
        })
    }
}

impl ScalableRelease {
    /// The default profile: Pulsar master.
    pub fn master() -> Self {
        Self {
            half: SegmentHalf::High,
            name: "master".to_owned(),
        }
    }
}

/// A routing key (str or bytes), remembering which it was.
impl<'py> FromArg<'py> for RoutingKey {
    fn from_arg(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Self> {
        let text = obj.is_instance_of::<PyString>();
        Ok(RoutingKey::new(key_bytes(obj, what)?, text))
    }
}

argument!(
    /// A callback (always optional: see [`opt_arg`]).
    Callback(Py<PyAny>) = |obj, what| {
        if obj.is_callable() {
            return Ok(obj.clone().unbind());
        }
        Err(wrong_type(format!(
            "{what} must be callable or None, got {}",
            type_name(obj)
        )))
    }
);

/// The items of any iterable but a lone str or bytes (whose items would be characters),
/// described as `expected` when it is not one.
pub fn sequence<'py>(
    obj: &Bound<'py, PyAny>,
    what: &str,
    expected: &str,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let not_one = || wrong_type(format!("{what} must be {expected}, got {}", type_name(obj)));
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(not_one());
    }
    obj.try_iter().map_err(|_| not_one())?.collect()
}

/// Each item of the [`sequence`] `obj`, converted by `convert` under the name `what[index]`.
pub fn each<'py, T>(
    obj: &Bound<'py, PyAny>,
    what: &str,
    expected: &str,
    convert: impl Fn(&Bound<'py, PyAny>, &str) -> PyResult<T>,
) -> PyResult<Vec<T>> {
    sequence(obj, what, expected)?
        .iter()
        .enumerate()
        .map(|(i, item)| convert(item, &format!("{what}[{i}]")))
        .collect()
}

argument!(
    /// 16-bit hashes from any iterable (Pulsar takes a set), each in `[0, 0xFFFF]`.
    RingHashSet(Vec<u16>) = |obj, what| each(obj, what, "a sequence", |item, what| {
        arg::<RingHash>(item, what).map(|h| h.0)
    })
);

argument!(
    /// Glob patterns from an iterable of str or bytes (a lone pattern is refused: iterating
    /// it would make a pattern of each character).
    KeyPatterns(Vec<Box<[u8]>>) = |obj, what| {
        if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
            return Err(wrong_type(format!(
                "{what} must be an iterable of str or bytes patterns, not a single pattern"
            )));
        }
        each(obj, what, "an iterable of str or bytes", |item, what| {
            Ok(key_bytes(item, what)?.into())
        })
    }
);

argument!(
    /// A consumer id or None for each item of a sequence.
    OptConsumerIds(Vec<Option<u64>>) = |obj, what| {
        each(obj, what, "a sequence", |item, what| {
            Ok(opt_arg::<ConsumerId>(Some(item), what)?.map(|c| c.0))
        })
    }
);

argument!(
    /// A set of consumer ids from any iterable.
    ConsumerSet(HashSet<u64>) = |obj, what| {
        let ids = each(obj, what, "an iterable of consumer ids", consumer_value)?;
        Ok(ids.into_iter().collect())
    }
);

argument!(
    /// `{consumer_id: available permits}`.
    Permits(HashMap<u64, i64>) = |obj, what| {
        dict_items(obj, what)?
            .into_iter()
            .map(|(k, v)| {
                let consumer = consumer_value(&k, &format!("{what} key"))?;
                Ok((consumer, int_arg(&v, &format!("{what}[{consumer}]"))?))
            })
            .collect()
    }
);

argument!(
    /// `{sticky_key_hash: consumer_id or None}`.
    ConsumersByHash(HashMap<u16, Option<u64>>) = |obj, what| {
        dict_items(obj, what)?
            .into_iter()
            .map(|(k, v)| {
                let RingHash(hash) = arg(&k, &format!("{what} key"))?;
                let consumer = opt_arg::<ConsumerId>(Some(&v), &format!("{what}[{hash}]"))?;
                Ok((hash, consumer.map(|c| c.0)))
            })
            .collect()
    }
);

#[allow(clippy::type_complexity)]
fn dict_items<'py>(
    obj: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
    let dict = obj
        .cast::<PyDict>()
        .map_err(|_| wrong_type(format!("{what} must be a dict, got {}", type_name(obj))))?;
    Ok(dict.iter().collect())
}

/// Fails unless every named length equals the first.
pub fn same_lengths(lengths: &[(&str, usize)]) -> PyResult<()> {
    let (first, n) = lengths[0];
    for &(name, len) in &lengths[1..] {
        if len != n {
            return Err(invalid(format!(
                "{name} has {len} items but {first} has {n}"
            )));
        }
    }
    Ok(())
}

/// Outputs of up to this many items are copied into an array NumPy allocates: handing a
/// vector over without a copy costs a Python object to own it, more than copying a short one.
const COPIED_OUTPUT: usize = 256;

/// `values` as a NumPy array.
pub fn numpy<T: Element>(py: Python<'_>, values: Vec<T>) -> Bound<'_, PyArray1<T>> {
    match values.len() <= COPIED_OUTPUT {
        true => PyArray1::from_slice(py, &values),
        false => PyArray1::from_vec(py, values),
    }
}
