//! Python key batches, read once into the kernels' key types: lists and tuples (of
//! str/bytes/None, or of ints), NumPy arrays, Arrow arrays and streams.
//!
//! A list or tuple of str/bytes is not copied out whole: `ByteKeys::map` packs it a piece at
//! a time and maps each piece while its keys are still in cache. Copying every key to memory
//! and reading it back cost more than mapping it, and the copy of a large batch took as much
//! memory as its keys.

use std::mem::MaybeUninit;
use std::ops::Range;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, BinaryArray, LargeBinaryArray};
use arrow_schema::DataType;
use numpy::{PyArray1, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::errors::{self, At, Raise};
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use pyo3::{ffi, intern};
use pyo3_arrow::{PyArray, PyChunkedArray};

use crate::conversions::{int_at, is_int, key_bytes, key_bytes_at, type_name};
use keyshared_kernels::error::{InvalidInput, KernelResult};
use keyshared_kernels::hashing;
use keyshared_kernels::keys::{
    IntBatch, IntChunk, IntColumn, IntValues, KeyBatch, KeyChunk, KeyColumn, KeyMap, PackedKeys,
};
use keyshared_kernels::parallel::{fill_pieces, output};

/// What a batch call takes: byte keys only (the key hashes), or also int keys with nulls
/// kept (the partitioners); the two keep their own words for what they refuse.
#[derive(Clone, Copy)]
struct Intake {
    /// Whether a null key is read (else refused by index).
    nulls: bool,
    /// None: byte keys only; Some(side): int keys too, an all-null batch as ints if `side`.
    ints: Option<bool>,
}

impl Intake {
    fn one_key_hint(self) -> &'static str {
        match self.ints {
            None => "use key_hash for one key",
            Some(_) => "use partition for one key",
        }
    }
}

/// Keys of a batch call as `read` finds them: byte keys or int keys.
pub enum Keys<'py> {
    Bytes(ByteKeys<'py>),
    Ints(IntBatch),
}

/// Byte keys: a batch read whole (Arrow and NumPy), or a list or tuple of str/bytes/None
/// left in place until it is mapped.
pub enum ByteKeys<'py> {
    Batch(KeyBatch),
    Objects(Objects<'py>),
}

/// A list or tuple of str/bytes/None keys, read when it is mapped.
pub struct Objects<'py> {
    sequence: Bound<'py, PyAny>,
    /// Whether a None is read as a null key (else refused by index).
    nulls: bool,
    null_key: Option<Vec<u8>>,
}

/// Keys of a list or tuple packed and mapped at once: the piece's packed keys (about 130 KB
/// for keys of 23 bytes) stay in the core's own cache while they are mapped, and its output
/// in the nearest one (a few percent faster a key than pieces eight times as large).
const PIECE: usize = 1 << 12;

/// Two outputs a key, as a batch kernel ([`KeyMap`]) writes them.
type Mapped<M> = (Vec<<M as KeyMap>::A>, Vec<<M as KeyMap>::B>);

impl<'py> ByteKeys<'py> {
    /// `m` over every key, the outputs in key order, `null` for a null key. A batch read
    /// whole is mapped once, on `threads` with the GIL released; a list or tuple a piece at
    /// a time (see `Objects::map`).
    pub fn map<M: KeyMap>(
        self,
        py: Python<'py>,
        threads: usize,
        m: &M,
        null: (M::A, M::B),
    ) -> PyResult<Mapped<M>> {
        match self {
            Self::Batch(batch) => Ok(py.detach(|| batch.map(threads, m, null))),
            Self::Objects(objects) => objects.map(threads, m, null),
        }
    }

    /// Every key in one batch, for calls that read the keys one by one.
    pub fn whole(self) -> PyResult<KeyBatch> {
        match self {
            Self::Batch(batch) => Ok(batch),
            Self::Objects(objects) => {
                let len = objects.sequence.len()?;
                objects.batch(0..len, len)
            }
        }
    }
}

/// Lists and tuples of up to this many keys are hashed one at a time with the GIL held and
/// no key batch: releasing the GIL and packing the keys cost more than such a batch's
/// hashing, and the lanes gain nothing on so few keys.
pub const SHORT: usize = 64;

/// `then` of the key hashes of every key, if `keys` is a list or tuple of at most [`SHORT`]
/// keys, read in place with the GIL held and no key batch; `null_key`'s hash stands for a
/// null key where given (else a null is refused by index). None for any other batch.
#[inline]
pub fn hash_short<R>(
    keys: &Bound<'_, PyAny>,
    null_key: Option<&[u8]>,
    then: impl FnOnce(&[u32]) -> R,
) -> PyResult<Option<R>> {
    // Only the exact types: `read` looks for other forms on anything else.
    if !keys.is_exact_instance_of::<PyList>() && !keys.is_exact_instance_of::<PyTuple>() {
        return Ok(None);
    }
    let py = keys.py();
    // Not zeroed first: only the hashes written are read.
    let mut hashes = [MaybeUninit::<u32>::uninit(); SHORT];
    // SAFETY: nothing here runs Python code (`object_key` runs none).
    let read = unsafe {
        with_items(keys, |items| -> PyResult<Option<usize>> {
            if items.len() > SHORT {
                return Ok(None);
            }
            for (i, (&item, hash)) in items.iter().zip(&mut hashes).enumerate() {
                let key = object_key(py, item, i, null_key.is_some())?;
                hash.write(hashing::key_hash(key.or(null_key).unwrap_or_default()));
            }
            Ok(Some(items.len()))
        })
    };
    // `then` runs after the items are read: it may run Python code (an allocation may
    // collect garbage).
    let Some(n) = read.transpose()?.flatten() else {
        return Ok(None);
    };
    // SAFETY: the loop wrote the first `n` hashes.
    Ok(Some(then(unsafe { hashes[..n].assume_init_ref() })))
}

/// Pieces each thread maps between two releases of the GIL: other Python threads wait for
/// the GIL no longer than it takes to map a few pieces.
const PIECES_PER_THREAD: usize = 16;

/// A list's or tuple's items, read on the pool's threads while the calling thread holds the
/// GIL and runs no Python code, so that no item can change or be freed meanwhile.
struct Items<'a>(&'a [*mut ffi::PyObject]);

impl Items<'_> {
    fn get(&self, range: Range<usize>) -> &[*mut ffi::PyObject] {
        &self.0[range]
    }
}

// SAFETY: the threads only read the items' objects (`plain_key`), never their reference
// counts, and only while the thread that lent them holds the GIL and waits (see `Items`).
unsafe impl Sync for Items<'_> {}

impl Objects<'_> {
    /// `m` over every key as `ByteKeys::map` does, a piece at a time on up to `threads`
    /// threads of the pool, each piece's keys still in cache when they are mapped. Only the
    /// objects' reading needs the GIL held: by this thread, which waits for the pieces and
    /// lets go of the GIL between rounds of them. A piece with a key that is not a plain str
    /// or bytes (or a None read as null) is packed and mapped here instead, with the checks
    /// and messages of `pack_objects`.
    fn map<M: KeyMap>(&self, threads: usize, m: &M, null: (M::A, M::B)) -> PyResult<Mapped<M>> {
        let py = self.sequence.py();
        let len = self.sequence.len()?;
        let round = PIECE * PIECES_PER_THREAD * threads;
        let (mut a, mut b) = (output::<M::A>(len), output::<M::B>(len));
        for first in (0..len).step_by(round) {
            let keys = first..len.min(first + round);
            let a = &mut a.spare_capacity_mut()[keys.clone()];
            let b = &mut b.spare_capacity_mut()[keys.clone()];
            // SAFETY: nothing here runs Python code until the pieces are read (see `Items`).
            let left = unsafe {
                self.with_len(len, |items| {
                    let items = Items(&items[keys.clone()]);
                    let (nulls, null_key) = (self.nulls, &self.null_key);
                    fill_pieces(&mut *a, &mut *b, PIECE, threads, |piece, a, b| {
                        map_plain(items.get(piece), nulls, null_key, (m, null), a, b)
                    })
                })
            }?;
            for piece in left {
                let batch = self.batch(first + piece.start..first + piece.end, len)?;
                batch.map_into(m, null, &mut a[piece.clone()], &mut b[piece]);
            }
            py.detach(|| ());
        }
        // SAFETY: each round's pieces were written by `map_plain` or, where it wrote none, here.
        unsafe {
            a.set_len(len);
            b.set_len(len);
        }
        Ok((a, b))
    }

    /// Keys `range` as a batch, null keys standing in where given.
    fn batch(&self, range: Range<usize>, len: usize) -> PyResult<KeyBatch> {
        nullable(self.pack(range, len)?, &self.null_key).py()
    }

    /// `f` of the items of a list or tuple that held `len` items when its mapping began (the
    /// GIL is released between pieces, so another thread may have changed a list).
    ///
    /// # Safety
    /// As for `with_items`.
    unsafe fn with_len<R>(
        &self,
        len: usize,
        f: impl FnOnce(&[*mut ffi::PyObject]) -> R,
    ) -> PyResult<R> {
        let sequence = &self.sequence;
        let read = with_items(sequence, |items| match items.len() == len {
            true => Ok(f(items)),
            false => Err(errors::invalid_at(
                At::arg("keys"),
                format!(
                    "keys changed size while they were read, from {len} to {} items",
                    items.len()
                ),
            )),
        });
        read.unwrap_or_else(|| Err(not_a_sequence(sequence)))
    }

    /// Packs keys `range` of a list or tuple that held `len` items when its mapping began.
    fn pack(&self, range: Range<usize>, len: usize) -> PyResult<PackedKeys> {
        let py = self.sequence.py();
        // SAFETY: pack_objects runs no Python code (see there), and reads the slice in place.
        unsafe {
            self.with_len(len, |items| {
                pack_objects(py, &items[range.clone()], range.start, self.nulls)
            })?
        }
    }
}

/// Packed keys as a batch, `null_key` standing in for null keys where given (they were
/// refused by index where it is not, by `pack_objects`).
fn nullable(packed: PackedKeys, null_key: &Option<Vec<u8>>) -> KernelResult<KeyBatch> {
    let batch = KeyBatch::nullable(vec![KeyChunk::Packed(packed)]);
    match null_key {
        None => Ok(batch),
        Some(k) => batch.with_null_key(Some(k.clone())),
    }
}

fn not_a_sequence(keys: &Bound<'_, PyAny>) -> PyErr {
    errors::wrong_type_at(
        At::arg("keys"),
        format!(
            "keys must be a list or tuple of str/bytes, a NumPy array or an Arrow array, got {}",
            type_name(keys)
        ),
    )
}

/// The `null_key` argument (str, bytes, or None for none) as bytes.
pub fn null_key_arg(null_key: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<u8>>> {
    null_key
        .filter(|k| !k.is_none())
        .map(|k| key_bytes(k, "null_key").map(<[u8]>::to_vec))
        .transpose()
}

/// Reads `keys` as a batch of byte keys; `null_key` stands in for null keys.
pub fn key_batch<'py>(
    keys: &Bound<'py, PyAny>,
    null_key: Option<Vec<u8>>,
) -> PyResult<ByteKeys<'py>> {
    let intake = Intake {
        nulls: null_key.is_some(),
        ints: None,
    };
    match read(keys, intake)? {
        Keys::Bytes(ByteKeys::Batch(batch)) => {
            Ok(ByteKeys::Batch(batch.with_null_key(null_key).py()?))
        }
        Keys::Bytes(ByteKeys::Objects(objects)) => Ok(ByteKeys::Objects(Objects {
            null_key,
            ..objects
        })),
        Keys::Ints(_) => unreachable_ints(),
    }
}

/// Int keys are only read where asked for; kept as an error rather than a panic.
fn unreachable_ints<T>() -> PyResult<T> {
    Err(errors::wrong_type_at(
        At::arg("keys"),
        "keys must be str or bytes, got int",
    ))
}

/// `key_batch`, also taking any other iterable of keys (a generator, a set), collected into
/// a list first.
pub fn any_key_batch(keys: &Bound<'_, PyAny>) -> PyResult<KeyBatch> {
    match key_batch(keys, None).and_then(ByteKeys::whole) {
        Err(err) if err.is_instance_of::<PyTypeError>(keys.py()) && is_other_iterable(keys) => {
            let items = keys.try_iter()?.collect::<PyResult<Vec<_>>>()?;
            key_batch(PyList::new(keys.py(), items)?.as_any(), None)?.whole()
        }
        result => result,
    }
}

/// Reads `keys` for a partitioner: byte keys or int keys (by the first key that is not
/// null; an all-null batch as ints if `ints_if_all_null`), nulls kept; any other iterable
/// is collected into a list first.
pub fn key_column<'py>(keys: &Bound<'py, PyAny>, ints_if_all_null: bool) -> PyResult<Keys<'py>> {
    let intake = Intake {
        nulls: true,
        ints: Some(ints_if_all_null),
    };
    if is_other_iterable(keys) {
        let items = keys.try_iter()?.collect::<PyResult<Vec<_>>>()?;
        return read(PyList::new(keys.py(), items)?.as_any(), intake);
    }
    read(keys, intake).map_err(|err| match is_batch(keys) {
        true => err,
        false => errors::wrong_type_at(
            At::arg("keys"),
            format!(
                "keys must be a sequence of str/bytes/None or of ints, a NumPy integer array or \
             an Arrow array, got {}",
                type_name(keys)
            ),
        ),
    })
}

fn is_batch(keys: &Bound<'_, PyAny>) -> bool {
    let py = keys.py();
    keys.is_instance_of::<PyString>()
        || keys.is_instance_of::<PyBytes>()
        || keys.is_instance_of::<PyList>()
        || keys.is_instance_of::<PyTuple>()
        || keys.cast::<PyUntypedArray>().is_ok()
        || keys
            .hasattr(intern!(py, "__arrow_c_array__"))
            .unwrap_or(false)
        || keys
            .hasattr(intern!(py, "__arrow_c_stream__"))
            .unwrap_or(false)
}

fn is_other_iterable(keys: &Bound<'_, PyAny>) -> bool {
    !is_batch(keys) && keys.try_iter().is_ok()
}

fn read<'py>(keys: &Bound<'py, PyAny>, intake: Intake) -> PyResult<Keys<'py>> {
    let py = keys.py();
    // An exact list or tuple has none of the other forms' attributes: looking each up and
    // missing would cost more than a short batch's hashing.
    let exact = keys.is_exact_instance_of::<PyList>() || keys.is_exact_instance_of::<PyTuple>();
    if !exact {
        if let Some(column) = other_column(keys, intake)? {
            return Ok(column);
        }
    }
    if let Some(side) = intake.ints {
        // Int keys or byte keys by the first key that is not None, so that no other key is
        // touched for it.
        // SAFETY: the slice is read before any Python code runs (`first_key` runs none).
        if let Some(first) = unsafe { with_items(keys, |items| first_key(py, items)) } {
            // `is_int` may run Python code (an `__index__` lookup): the items are read
            // afresh below.
            if first.as_ref().map_or(side, is_int) {
                return int_sequence(keys).map(whole);
            }
        }
    }
    if keys.is_instance_of::<PyList>() || keys.is_instance_of::<PyTuple>() {
        return Ok(Keys::Bytes(ByteKeys::Objects(Objects {
            sequence: keys.clone(),
            nulls: intake.nulls,
            null_key: None,
        })));
    }
    Err(not_a_sequence(keys))
}

/// Keys in any form but a list or tuple (Arrow, NumPy), read whole; None for a list, a
/// tuple or anything else.
fn other_column<'py>(keys: &Bound<'py, PyAny>, intake: Intake) -> PyResult<Option<Keys<'py>>> {
    let py = keys.py();
    if keys.is_instance_of::<PyString>() || keys.is_instance_of::<PyBytes>() {
        return Err(errors::wrong_type_at(
            At::arg("keys"),
            format!(
                "keys must be a batch of keys, not a single str or bytes; {}",
                intake.one_key_hint()
            ),
        ));
    }
    if keys.hasattr(intern!(py, "__arrow_c_array__"))? {
        let (array, _) = keys.extract::<PyArray>()?.into_inner();
        return arrow_column(vec![array], intake).map(whole).map(Some);
    }
    if keys.hasattr(intern!(py, "__arrow_c_stream__"))? {
        let (arrays, _) = keys.extract::<PyChunkedArray>()?.into_inner();
        return arrow_column(arrays, intake).map(whole).map(Some);
    }
    if let Ok(array) = keys.cast::<PyUntypedArray>() {
        return numpy_column(array, intake).map(Some);
    }
    Ok(None)
}

/// A column read whole.
fn whole<'py>(column: KeyColumn) -> Keys<'py> {
    match column {
        KeyColumn::Bytes(batch) => Keys::Bytes(ByteKeys::Batch(batch)),
        KeyColumn::Ints(ints) => Keys::Ints(ints),
    }
}

/// Calls `f` with the items of a list or tuple (subclasses too: they keep the base layout)
/// as borrowed pointers; None for any other object.
///
/// SAFETY (for callers): the GIL is held, and `f` runs no Python code, so that nothing can
/// change the container (and free or move its items) while `f` reads them.
unsafe fn with_items<R>(
    keys: &Bound<'_, PyAny>,
    f: impl FnOnce(&[*mut ffi::PyObject]) -> R,
) -> Option<R> {
    let (items, len) = if let Ok(list) = keys.cast::<PyList>() {
        // An empty list has no item array (a null pointer), which no slice may point at.
        match list.len() {
            0 => return Some(f(&[])),
            len => ((*(list.as_ptr() as *mut ffi::PyListObject)).ob_item, len),
        }
    } else if let Ok(tuple) = keys.cast::<PyTuple>() {
        // A tuple's items are inline after its header.
        let tuple_object = tuple.as_ptr() as *mut ffi::PyTupleObject;
        ((*tuple_object).ob_item.as_mut_ptr(), tuple.len())
    } else {
        return None;
    };
    // SAFETY: a list's item array, and a tuple's inline items, hold its len() live objects.
    Some(f(std::slice::from_raw_parts(items, len)))
}

/// The first item that is not None, as a new reference; None if there is none. Only
/// pointers are compared until it is found.
fn first_key<'py>(py: Python<'py>, items: &[*mut ffi::PyObject]) -> Option<Bound<'py, PyAny>> {
    // SAFETY: the GIL is held and `items` are live (see `with_items`); the new reference
    // keeps the item alive after the container changes.
    let none = unsafe { ffi::Py_None() };
    let first = items.iter().find(|&&item| item != none)?;
    Some(unsafe { Bound::from_borrowed_ptr(py, *first) })
}

/// Arrow arrays as one column: all of byte types or (where int keys are read) all of
/// integer types. An all-null array (what pyarrow infers for nothing but None) takes the
/// batch's side.
fn arrow_column(arrays: Vec<ArrayRef>, intake: Intake) -> PyResult<KeyColumn> {
    let unsupported = |a: &ArrayRef| {
        errors::wrong_type_at(
            At::arg("keys"),
            match intake.ints {
                None => format!(
                    "keys: Arrow type {} is not supported; use string, large_string, binary or \
                 large_binary",
                    a.data_type()
                ),
                Some(_) => format!(
                    "keys: Arrow type {} is not supported; use string, large_string, binary, \
                 large_binary, or an integer type up to int64 (one kind for the whole batch)",
                    a.data_type()
                ),
            },
        )
    };
    let ints = match (
        intake.ints,
        arrays.iter().find(|a| a.data_type() != &DataType::Null),
    ) {
        (None, _) => false,
        (Some(_), Some(a)) => int_chunk(a).is_some(),
        (Some(side), None) => side,
    };
    if ints {
        let chunks = arrays.iter().map(|a| match a.data_type() {
            DataType::Null => Ok(IntChunk {
                values: IntValues::Int64(vec![0; a.len()]),
                nulls: (0..a.len()).collect(),
            }),
            _ => int_chunk(a).ok_or_else(|| unsupported(a)),
        });
        let chunks = chunks.collect::<PyResult<_>>()?;
        return Ok(KeyColumn::Ints(IntBatch { chunks }));
    }
    let chunks = arrays
        .iter()
        .map(|a| byte_chunk(a).ok_or_else(|| unsupported(a)));
    let chunks = chunks.collect::<PyResult<_>>()?;
    Ok(KeyColumn::Bytes(KeyBatch::nullable(chunks)))
}

fn byte_chunk(array: &ArrayRef) -> Option<KeyChunk> {
    Some(match array.data_type() {
        DataType::Utf8 => KeyChunk::Binary(BinaryArray::from(array.as_string::<i32>().clone())),
        DataType::LargeUtf8 => {
            KeyChunk::LargeBinary(LargeBinaryArray::from(array.as_string::<i64>().clone()))
        }
        DataType::Binary => KeyChunk::Binary(array.as_binary::<i32>().clone()),
        DataType::LargeBinary => KeyChunk::LargeBinary(array.as_binary::<i64>().clone()),
        DataType::Utf8View => KeyChunk::BinaryView(array.as_string_view().clone().to_binary_view()),
        DataType::BinaryView => KeyChunk::BinaryView(array.as_binary_view().clone()),
        DataType::Null => KeyChunk::Binary(BinaryArray::new_null(array.len())),
        _ => return None,
    })
}

/// An Arrow integer array as int32 or int64 values, by the type Spark gives each width
/// (`IntColumn`); None for other types and for uint64.
fn int_chunk(array: &ArrayRef) -> Option<IntChunk> {
    fn take<T: ArrowPrimitiveType, U>(
        array: &ArrayRef,
        f: fn(T::Native) -> U,
    ) -> (Vec<U>, Vec<usize>) {
        let a = array.as_primitive::<T>();
        let nulls = match a.null_count() {
            0 => vec![],
            _ => (0..a.len()).filter(|&i| a.is_null(i)).collect(),
        };
        (a.values().iter().map(|&v| f(v)).collect(), nulls)
    }
    let is_int = |bits, signed| IntColumn { bits, signed }.is_int().ok();
    let (values, nulls) = match array.data_type() {
        DataType::Int8 if is_int(8, true)? => {
            let (v, n) = take::<Int8Type, _>(array, i32::from);
            (IntValues::Int32(v), n)
        }
        DataType::Int16 if is_int(16, true)? => {
            let (v, n) = take::<Int16Type, _>(array, i32::from);
            (IntValues::Int32(v), n)
        }
        DataType::UInt8 if is_int(8, false)? => {
            let (v, n) = take::<UInt8Type, _>(array, i32::from);
            (IntValues::Int32(v), n)
        }
        DataType::UInt16 if is_int(16, false)? => {
            let (v, n) = take::<UInt16Type, _>(array, i32::from);
            (IntValues::Int32(v), n)
        }
        DataType::Int32 if is_int(32, true)? => {
            let (v, n) = take::<Int32Type, _>(array, |v| v);
            (IntValues::Int32(v), n)
        }
        DataType::UInt32 if !is_int(32, false)? => {
            let (v, n) = take::<UInt32Type, _>(array, i64::from);
            (IntValues::Int64(v), n)
        }
        DataType::Int64 if !is_int(64, true)? => {
            let (v, n) = take::<Int64Type, _>(array, |v| v);
            (IntValues::Int64(v), n)
        }
        _ => return None,
    };
    Some(IntChunk { values, nulls })
}

/// A list or tuple of ints and None as int keys.
fn int_sequence(keys: &Bound<'_, PyAny>) -> PyResult<KeyColumn> {
    // New references, since reading an int may run Python code (`__index__`), which may
    // change the container.
    // SAFETY: taking the references runs no Python code.
    let items = unsafe {
        with_items(keys, |items| {
            let item = |&p| Bound::from_borrowed_ptr(keys.py(), p);
            items.iter().map(item).collect::<Vec<_>>()
        })
    }
    .unwrap_or_default();
    let mut values = Vec::with_capacity(items.len());
    let mut nulls = vec![];
    for (i, item) in items.iter().enumerate() {
        match item.is_none() {
            true => {
                nulls.push(i);
                values.push(0);
            }
            false => values.push(int_at(item, At::item("keys", i))?),
        }
    }
    let values = IntValues::Int64(values);
    let chunks = vec![IntChunk { values, nulls }];
    Ok(KeyColumn::Ints(IntBatch { chunks }))
}

/// A NumPy integer array as int32 or int64 values, by the type Spark gives each width
/// (`IntColumn`), in any byte order and stride.
fn numpy_ints(array: &Bound<'_, PyUntypedArray>) -> PyResult<KeyColumn> {
    let dtype = array.dtype();
    let column = IntColumn {
        bits: 8 * u32::try_from(dtype.itemsize()).unwrap_or(u32::MAX),
        signed: dtype.kind() == b'i',
    };
    let is_int = column.is_int().py_in("keys")?;
    // A copy in native order, contiguous, of the width read: NumPy converts byte order,
    // stride and width in one pass (a no-op for what is already so).
    let py = array.py();
    let native = py.import(intern!(py, "numpy"))?.call_method1(
        intern!(py, "ascontiguousarray"),
        (array, if is_int { "=i4" } else { "=i8" }),
    )?;
    let values = match is_int {
        true => IntValues::Int32(native.cast::<PyArray1<i32>>()?.to_vec()?),
        false => IntValues::Int64(native.cast::<PyArray1<i64>>()?.to_vec()?),
    };
    let chunks = vec![IntChunk {
        values,
        nulls: vec![],
    }];
    Ok(KeyColumn::Ints(IntBatch { chunks }))
}

fn numpy_column<'py>(array: &Bound<'py, PyUntypedArray>, intake: Intake) -> PyResult<Keys<'py>> {
    if array.ndim() != 1 {
        let message = format!(
            "keys must be a one-dimensional array, got {} dimensions",
            array.ndim()
        );
        return Err(match intake.ints {
            None => errors::invalid_at(At::arg("keys"), message),
            Some(_) => errors::wrong_type_at(At::arg("keys"), message),
        });
    }
    let kind = array.dtype().kind();
    match (intake.ints, kind) {
        (Some(_), b'i' | b'u') => numpy_ints(array).map(whole),
        (Some(_), b'S' | b'U') | (None, _) => {
            let mask = numpy_mask(array)?;
            let packed = pack_numpy(array, intake.nulls, mask.as_deref())?;
            Ok(whole(KeyColumn::Bytes(KeyBatch::nullable(vec![
                KeyChunk::Packed(packed),
            ]))))
        }
        // Objects may be ints; other dtypes (bool, float) are read as their items, which
        // the checks then name.
        (Some(_), _) => {
            let items = array.call_method0(intern!(array.py(), "tolist"))?;
            read(&items, intake).and_then(|keys| match keys {
                Keys::Bytes(bytes) => Ok(Keys::Bytes(ByteKeys::Batch(bytes.whole()?))),
                ints => Ok(ints),
            })
        }
    }
}

/// Packs the keys of a list, tuple or object array, given as borrowed object pointers.
///
/// SAFETY (for callers): `items` must be live objects owned by a container that the caller
/// holds, with the GIL held. Nothing here runs Python code or releases the GIL, so the
/// container cannot change while it is read.
/// `first` is the index of the first of them in the whole batch, which errors name.
unsafe fn pack_objects(
    py: Python<'_>,
    items: &[*mut ffi::PyObject],
    first: usize,
    nulls: bool,
) -> PyResult<PackedKeys> {
    pack_with(items, |i, item| object_key(py, item, first + i, nulls))
}

/// `pack_objects` of plain keys only (and None, read as a null where `nulls`): None at the
/// first other item, left to `pack_objects`. It calls nothing in libpython and touches no
/// reference count, so it may run on any thread while the one that holds the GIL waits.
///
/// SAFETY (for callers): the items are live and unchanged while it runs (see `Items`).
unsafe fn pack_plain(items: &[*mut ffi::PyObject], nulls: bool) -> Option<PackedKeys> {
    let none = ffi::Py_None();
    pack_with(items, |_, item| match nulls && item == none {
        true => Ok(None),
        false => Err(()),
    })
    .ok()
}

/// `m` of plain keys (and None, read as a null where `nulls`; `null_key` stands in for it
/// where given) into `a` and `b`; false, having written nothing, at the first other item.
///
/// SAFETY (for callers): as for `pack_plain`.
unsafe fn map_plain<M: KeyMap>(
    items: &[*mut ffi::PyObject],
    nulls: bool,
    null_key: &Option<Vec<u8>>,
    (m, null): (&M, (M::A, M::B)),
    a: &mut [MaybeUninit<M::A>],
    b: &mut [MaybeUninit<M::B>],
) -> bool {
    let Some(Ok(batch)) = pack_plain(items, nulls).map(|p| nullable(p, null_key)) else {
        return false;
    };
    batch.map_into(m, null, a, b);
    true
}

/// Packs `items`: the plain keys in place, any other item as `other(index, item)` says (its
/// bytes, or None for a null).
///
/// SAFETY (for callers): as for `pack_objects`.
#[inline(always)]
unsafe fn pack_with<'a, E>(
    items: &[*mut ffi::PyObject],
    mut other: impl FnMut(usize, *mut ffi::PyObject) -> Result<Option<&'a [u8]>, E>,
) -> Result<PackedKeys, E> {
    let mut packed = PackedKeys::with_capacity(items.len(), items.len() * 32);
    let mut i = 0;
    while i < items.len() {
        // The keys read in place, in one run up to the first that is not.
        i = packed.push_run(i..items.len(), |i| {
            if let Some(&ahead) = items.get(i + PREFETCH_AHEAD) {
                prefetch(ahead);
            }
            plain_key(items[i])
        });
        let Some(&item) = items.get(i) else {
            break;
        };
        match other(i, item)? {
            Some(bytes) => packed.push(bytes),
            None => packed.push_null(),
        }
        i += 1;
    }
    Ok(packed)
}

/// The bytes of the key `item` (item `index` of the batch), or None for a None read as a
/// null key (refused by index where nulls are not read).
///
/// SAFETY (for callers): as for `pack_objects`, `item` is live for `'a`.
unsafe fn object_key<'a>(
    py: Python<'_>,
    item: *mut ffi::PyObject,
    index: usize,
    nulls: bool,
) -> PyResult<Option<&'a [u8]>> {
    if let Some(bytes) = exact_key(item) {
        return Ok(Some(bytes));
    }
    if item == ffi::Py_None() {
        return match nulls {
            true => Ok(None),
            false => Err(null_error(index)),
        };
    }
    // Subclasses, wrong types and undecodable text: the checked path with messages.
    let item = Bound::from_borrowed_ptr(py, item);
    let bytes = key_bytes_at(&item, index)?;
    // SAFETY: the bytes are the object's own (its buffer, or the UTF-8 a str keeps), which
    // live as long as the object, not only as long as this reference to it.
    Ok(Some(std::slice::from_raw_parts(
        bytes.as_ptr(),
        bytes.len(),
    )))
}

/// Objects are scattered over the heap; asking for them early hides the cache misses. Keys
/// made one after another lie in order, which the hardware's own prefetch follows; for the
/// same keys shuffled, 16 ahead took a third off reading a list (8 ahead a little less).
const PREFETCH_AHEAD: usize = 16;

#[inline]
fn prefetch(obj: *mut ffi::PyObject) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint and never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(obj as *const i8);
        _mm_prefetch::<_MM_HINT_T0>((obj as *const i8).wrapping_add(64));
    }
}

/// The bytes of an exact `bytes`, or of an exact `str` whose characters are ASCII (most
/// keys), read in place with no call into libpython; None for any other object.
///
/// SAFETY: `obj` is live for `'a` and the GIL is held.
#[inline(always)]
unsafe fn plain_key<'a>(obj: *mut ffi::PyObject) -> Option<&'a [u8]> {
    let (data, size) = if ffi::PyUnicode_CheckExact(obj) != 0 {
        ascii_text(obj)?
    } else if ffi::PyBytes_CheckExact(obj) != 0 {
        (ffi::PyBytes_AS_STRING(obj) as *const u8, ffi::Py_SIZE(obj))
    } else {
        return None;
    };
    Some(std::slice::from_raw_parts(data, size as usize))
}

/// The bytes of an exact `str` or `bytes`, or None for anything else (or text that does not
/// encode, with the error cleared so that the checked path can report it).
///
/// SAFETY: `obj` is live for `'a` and the GIL is held.
pub unsafe fn exact_key<'a>(obj: *mut ffi::PyObject) -> Option<&'a [u8]> {
    if let Some(key) = plain_key(obj) {
        return Some(key);
    }
    if ffi::PyUnicode_CheckExact(obj) == 0 {
        return None;
    }
    let mut size: ffi::Py_ssize_t = 0;
    let data = ffi::PyUnicode_AsUTF8AndSize(obj, &mut size);
    if data.is_null() {
        ffi::PyErr_Clear();
        return None;
    }
    Some(std::slice::from_raw_parts(data as *const u8, size as usize))
}

/// A compact ASCII str's characters, which are its UTF-8 bytes, read in place (where
/// `PyUnicode_AsUTF8AndSize` would return the same); None for other text.
///
/// SAFETY: `obj` is a live `str` and the GIL is held.
#[cfg(not(any(Py_3_14, PyPy, GraalPy)))]
#[inline(always)]
unsafe fn ascii_text(obj: *mut ffi::PyObject) -> Option<(*const u8, ffi::Py_ssize_t)> {
    // CPython keeps such a string's characters right after its header, one byte each.
    (ffi::PyUnicode_IS_COMPACT_ASCII(obj) != 0).then(|| {
        (
            ffi::PyUnicode_DATA(obj) as *const u8,
            ffi::PyUnicode_GET_LENGTH(obj),
        )
    })
}

/// pyo3 does not read a str's layout from Python 3.14 on: every str takes the call.
#[cfg(any(Py_3_14, PyPy, GraalPy))]
#[inline(always)]
unsafe fn ascii_text(_: *mut ffi::PyObject) -> Option<(*const u8, ffi::Py_ssize_t)> {
    None
}

fn null_error(i: usize) -> PyErr {
    errors::worded(
        &InvalidInput::NullKey { index: i },
        "keys",
        format!("keys[{i}] is None; pass null_key= to hash nulls as given bytes"),
    )
}

/// A masked array's mask (True where an item is masked, a null key), or None.
fn numpy_mask(array: &Bound<'_, PyUntypedArray>) -> PyResult<Option<Vec<bool>>> {
    let py = array.py();
    // Plain arrays are by far the most common: only subclasses can be masked.
    if array.get_type().is(numpy_type(py, "ndarray")?) {
        return Ok(None);
    }
    let ma = py.import(intern!(py, "numpy.ma"))?;
    if !array.is_instance(&ma.getattr(intern!(py, "MaskedArray"))?)? {
        return Ok(None);
    }
    let mask = ma.call_method1(intern!(py, "getmaskarray"), (array,))?;
    Ok(Some(mask.call_method0(intern!(py, "tolist"))?.extract()?))
}

fn numpy_type<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import(intern!(py, "numpy"))?.getattr(name)
}

fn pack_numpy(
    array: &Bound<'_, PyUntypedArray>,
    nulls: bool,
    mask: Option<&[bool]>,
) -> PyResult<PackedKeys> {
    let dtype = array.dtype();
    let null = |packed: &mut PackedKeys, i: usize| match nulls {
        true => {
            packed.push_null();
            Ok(())
        }
        false => Err(masked_error(i)),
    };
    match dtype.kind() {
        b'O' => {
            // Object arrays are copied to a contiguous list of pointers first, whatever
            // their strides; the copy holds the array's own references.
            let list = array.call_method0("tolist")?;
            let list = list.cast::<PyList>()?;
            for (i, _) in mask.into_iter().flatten().enumerate().filter(|&(_, &m)| m) {
                if !nulls {
                    return Err(masked_error(i));
                }
                list.set_item(i, array.py().None())?;
            }
            let objects = Objects {
                sequence: list.clone().into_any(),
                nulls,
                null_key: None,
            };
            objects.pack(0..list.len(), list.len())
        }
        b'S' => pack_fixed(array, dtype.itemsize(), 1, |packed, raw, i| {
            match mask.is_some_and(|m| m[i]) {
                true => null(packed, i)?,
                false => packed.push(trim_nuls(raw)),
            }
            Ok(())
        }),
        b'U' => {
            let big_endian = match dtype.byteorder() {
                b'>' => true,
                b'<' => false,
                _ => cfg!(target_endian = "big"),
            };
            pack_fixed(array, dtype.itemsize(), 4, |packed, raw, i| {
                if mask.is_some_and(|m| m[i]) {
                    return null(packed, i);
                }
                packed.push_ucs4(raw, big_endian).map_err(|code| {
                    errors::invalid_at(
                        At::item("keys", i),
                        format!("keys[{i}] holds {code:#x}, which is not a Unicode scalar value"),
                    )
                })
            })
        }
        _ => Err(errors::wrong_type_at(
            At::arg("keys"),
            format!(
                "keys: NumPy dtype {dtype} holds neither text nor bytes; use str, bytes or object"
            ),
        )),
    }
}

fn masked_error(i: usize) -> PyErr {
    errors::worded(
        &InvalidInput::NullKey { index: i },
        "keys",
        format!("keys[{i}] is masked (null); pass null_key= to hash nulls as given bytes"),
    )
}

/// NumPy pads fixed-width bytes with trailing zeros, which are not part of the value.
fn trim_nuls(raw: &[u8]) -> &[u8] {
    let end = raw.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
    &raw[..end]
}

/// Packs the items of a one-dimensional fixed-width array, following its stride; items of
/// `unit` bytes a character take about `itemsize / unit` bytes packed.
fn pack_fixed(
    array: &Bound<'_, PyUntypedArray>,
    itemsize: usize,
    unit: usize,
    push: impl Fn(&mut PackedKeys, &[u8], usize) -> PyResult<()>,
) -> PyResult<PackedKeys> {
    let len = array.len();
    let stride = array.strides()[0];
    let mut packed = PackedKeys::with_capacity(len, len * itemsize / unit);
    // SAFETY: the array is alive and borrowed for this whole call, which holds the GIL; the
    // item at index i starts `i * stride` bytes from the data pointer and spans itemsize bytes.
    let base = unsafe { (*array.as_array_ptr()).data as *const u8 };
    for i in 0..len {
        let raw = unsafe { std::slice::from_raw_parts(base.offset(i as isize * stride), itemsize) };
        push(&mut packed, raw, i)?;
    }
    Ok(packed)
}
