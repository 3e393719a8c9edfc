//! A small decoder (and encoder, for tests and fixtures) of Go's `encoding/gob`, enough for the
//! values Owncast keeps in its `datastore` table: one value per blob, of a basic type (bool, numbers,
//! string, bytes), a slice, a map or a struct of those, with the type definitions gob sends first.
//! Types that encode themselves (`GobEncoder`/`BinaryMarshaler`, such as `time.Time`) come back as
//! their raw bytes. Interface values are not supported (Owncast does not store any).
//!
//! Every length and count is checked against the input, and nesting is bounded, so a corrupt blob
//! is an error and never a panic or a huge allocation.

use std::collections::{BTreeMap, HashMap};

/// Errors decoding a gob stream.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GobError {
    #[error("the gob data ends early")]
    Truncated,
    #[error("malformed gob data: {0}")]
    Malformed(String),
    #[error("unsupported gob type: {0}")]
    Unsupported(String),
}

/// A decoded value. Struct fields that gob left out (zero values) are absent from the map.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Bytes(Vec<u8>),
    String(String),
    Slice(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Struct(BTreeMap<String, Value>),
    /// The bytes of a type that encodes itself (GobEncoder, BinaryMarshaler, TextMarshaler).
    Opaque(Vec<u8>),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Any numeric value as f64 (Owncast stores every number as float64).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            Value::Int(i) => Some(*i as f64),
            Value::Uint(u) => Some(*u as f64),
            _ => None,
        }
    }

    /// A struct field; a field gob left out is its type's zero value, so callers treat `None` as that.
    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Struct(m) => m.get(name),
            _ => None,
        }
    }

    /// A string field ("" when absent).
    pub fn str_field(&self, name: &str) -> String {
        self.field(name).and_then(Value::as_str).unwrap_or_default().to_string()
    }

    /// A bool field (false when absent).
    pub fn bool_field(&self, name: &str) -> bool {
        self.field(name).and_then(Value::as_bool).unwrap_or(false)
    }

    /// A numeric field (0 when absent).
    pub fn num_field(&self, name: &str) -> f64 {
        self.field(name).and_then(Value::as_f64).unwrap_or(0.0)
    }
}

// Predefined type ids (encoding/gob/type.go).
const T_BOOL: i64 = 1;
const T_INT: i64 = 2;
const T_UINT: i64 = 3;
const T_FLOAT: i64 = 4;
const T_BYTES: i64 = 5;
const T_STRING: i64 = 6;
const T_COMPLEX: i64 = 7;
const T_INTERFACE: i64 = 8;
/// The first id gob gives to a type of the program.
pub const FIRST_USER_TYPE: i64 = 65;

const MAX_DEPTH: usize = 32;

#[derive(Debug, Clone)]
enum Wire {
    Array { elem: i64, len: usize },
    Slice { elem: i64 },
    Struct { fields: Vec<(String, i64)> },
    Map { key: i64, elem: i64 },
    SelfEncoded,
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn uint(&mut self) -> Result<u64, GobError> {
        let first = *self.data.get(self.pos).ok_or(GobError::Truncated)?;
        self.pos += 1;
        if first < 0x80 {
            return Ok(u64::from(first));
        }
        let n = 256 - usize::from(first);
        if n > 8 {
            return Err(GobError::Malformed(format!("integer of {n} bytes")));
        }
        let bytes = self.take(n)?;
        Ok(bytes.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
    }

    fn int(&mut self) -> Result<i64, GobError> {
        let u = self.uint()?;
        Ok(if u & 1 == 1 { !(u >> 1) as i64 } else { (u >> 1) as i64 })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], GobError> {
        let end = self.pos.checked_add(n).ok_or(GobError::Truncated)?;
        let out = self.data.get(self.pos..end).ok_or(GobError::Truncated)?;
        self.pos = end;
        Ok(out)
    }

    fn len(&mut self) -> Result<usize, GobError> {
        let n = self.uint()?;
        let n = usize::try_from(n).map_err(|_| GobError::Truncated)?;
        // Every element takes at least one byte, so a count beyond the input is corrupt.
        if n > self.data.len() - self.pos {
            return Err(GobError::Truncated);
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<String, GobError> {
        let n = self.len()?;
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| GobError::Malformed("string is not UTF-8".into()))
    }

    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
}

/// Decode the one value of a gob stream (type definitions first, then the value).
pub fn decode(data: &[u8]) -> Result<Value, GobError> {
    let mut types: HashMap<i64, Wire> = HashMap::new();
    let mut outer = Reader { data, pos: 0 };
    while !outer.done() {
        let len = outer.len()?;
        let msg = outer.take(len)?;
        let mut r = Reader { data: msg, pos: 0 };
        let id = r.int()?;
        if id < 0 {
            let wire = read_wire_type(&mut r)?;
            types.insert(-id, wire);
            continue;
        }
        let is_struct = matches!(types.get(&id), Some(Wire::Struct { .. }));
        if !is_struct {
            // A value that is not a struct is sent as a struct of one field: delta 0.
            if r.uint()? != 0 {
                return Err(GobError::Malformed("non-struct value without its singleton marker".into()));
            }
        }
        return read_value(&mut r, id, &types, 0);
    }
    Err(GobError::Truncated)
}

/// Read a `wireType` struct: which kind of type it defines, by field number.
fn read_wire_type(r: &mut Reader) -> Result<Wire, GobError> {
    let mut field = 0u64;
    let mut wire = None;
    loop {
        let delta = r.uint()?;
        if delta == 0 {
            break;
        }
        field += delta;
        wire = Some(match field {
            1 => {
                let (c, extra) = read_common_and(r, &["Elem", "Len"])?;
                let _ = c;
                let elem = extra.first().copied().unwrap_or(0);
                let len = usize::try_from(extra.get(1).copied().unwrap_or(0))
                    .map_err(|_| GobError::Malformed("array length".into()))?;
                Wire::Array { elem, len }
            }
            2 => {
                let (_, extra) = read_common_and(r, &["Elem"])?;
                Wire::Slice { elem: extra.first().copied().unwrap_or(0) }
            }
            3 => Wire::Struct { fields: read_struct_type(r)? },
            4 => {
                let (_, extra) = read_common_and(r, &["Key", "Elem"])?;
                Wire::Map { key: extra.first().copied().unwrap_or(0), elem: extra.get(1).copied().unwrap_or(0) }
            }
            5..=7 => {
                read_common_and(r, &[])?;
                Wire::SelfEncoded
            }
            n => return Err(GobError::Unsupported(format!("wire type field {n}"))),
        });
    }
    wire.ok_or_else(|| GobError::Malformed("empty type definition".into()))
}

/// Read a struct whose field 1 is CommonType{Name, Id} and whose next fields are ints (type ids or
/// the array length), named in `extra`.
fn read_common_and(r: &mut Reader, extra: &[&str]) -> Result<(String, Vec<i64>), GobError> {
    let mut out = vec![0i64; extra.len()];
    let mut name = String::new();
    let mut field = 0u64;
    loop {
        let delta = r.uint()?;
        if delta == 0 {
            break;
        }
        field += delta;
        if field == 1 {
            name = read_common(r)?;
        } else {
            let i = usize::try_from(field - 2).map_err(|_| GobError::Malformed("field number".into()))?;
            let v = r.int()?;
            match out.get_mut(i) {
                Some(slot) => *slot = v,
                None => return Err(GobError::Malformed(format!("type definition field {field}"))),
            }
        }
    }
    Ok((name, out))
}

/// CommonType{Name string, Id int}: returns the name.
fn read_common(r: &mut Reader) -> Result<String, GobError> {
    let mut name = String::new();
    let mut field = 0u64;
    loop {
        let delta = r.uint()?;
        if delta == 0 {
            return Ok(name);
        }
        field += delta;
        match field {
            1 => name = r.string()?,
            2 => {
                r.int()?;
            }
            n => return Err(GobError::Malformed(format!("CommonType field {n}"))),
        }
    }
}

/// StructType{CommonType, Field []fieldType{Name, Id}}.
fn read_struct_type(r: &mut Reader) -> Result<Vec<(String, i64)>, GobError> {
    let mut fields = Vec::new();
    let mut field = 0u64;
    loop {
        let delta = r.uint()?;
        if delta == 0 {
            return Ok(fields);
        }
        field += delta;
        match field {
            1 => {
                read_common(r)?;
            }
            2 => {
                let n = r.len()?;
                for _ in 0..n {
                    let (mut name, mut id, mut f) = (String::new(), 0i64, 0u64);
                    loop {
                        let d = r.uint()?;
                        if d == 0 {
                            break;
                        }
                        f += d;
                        match f {
                            1 => name = r.string()?,
                            2 => id = r.int()?,
                            n => return Err(GobError::Malformed(format!("fieldType field {n}"))),
                        }
                    }
                    fields.push((name, id));
                }
            }
            n => return Err(GobError::Malformed(format!("StructType field {n}"))),
        }
    }
}

fn read_value(r: &mut Reader, id: i64, types: &HashMap<i64, Wire>, depth: usize) -> Result<Value, GobError> {
    if depth > MAX_DEPTH {
        return Err(GobError::Malformed("nested too deeply".into()));
    }
    Ok(match id {
        T_BOOL => Value::Bool(match r.uint()? {
            0 => false,
            1 => true,
            n => return Err(GobError::Malformed(format!("bool {n}"))),
        }),
        T_INT => Value::Int(r.int()?),
        T_UINT => Value::Uint(r.uint()?),
        T_FLOAT => Value::Float(f64::from_bits(r.uint()?.swap_bytes())),
        T_BYTES => {
            let n = r.len()?;
            Value::Bytes(r.take(n)?.to_vec())
        }
        T_STRING => Value::String(r.string()?),
        T_COMPLEX => return Err(GobError::Unsupported("complex".into())),
        T_INTERFACE => return Err(GobError::Unsupported("interface".into())),
        _ => match types.get(&id) {
            None => return Err(GobError::Malformed(format!("unknown type id {id}"))),
            Some(Wire::Slice { elem }) => {
                let n = r.len()?;
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    out.push(read_value(r, *elem, types, depth + 1)?);
                }
                Value::Slice(out)
            }
            Some(Wire::Array { elem, len }) => {
                let n = r.len()?;
                if n != *len {
                    return Err(GobError::Malformed(format!("array of {n} elements, {len} declared")));
                }
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    out.push(read_value(r, *elem, types, depth + 1)?);
                }
                Value::Slice(out)
            }
            Some(Wire::Map { key, elem }) => {
                let n = r.len()?;
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = read_value(r, *key, types, depth + 1)?;
                    let v = read_value(r, *elem, types, depth + 1)?;
                    out.push((k, v));
                }
                Value::Map(out)
            }
            Some(Wire::SelfEncoded) => {
                let n = r.len()?;
                Value::Opaque(r.take(n)?.to_vec())
            }
            Some(Wire::Struct { fields }) => {
                let mut out = BTreeMap::new();
                let mut at: i64 = -1;
                loop {
                    let delta = r.uint()?;
                    if delta == 0 {
                        break;
                    }
                    at = at
                        .checked_add(i64::try_from(delta).map_err(|_| GobError::Malformed("field delta".into()))?)
                        .ok_or_else(|| GobError::Malformed("field delta".into()))?;
                    let (name, fid) = usize::try_from(at)
                        .ok()
                        .and_then(|i| fields.get(i))
                        .ok_or_else(|| GobError::Malformed(format!("field {at} of a struct of {}", fields.len())))?;
                    out.insert(name.clone(), read_value(r, *fid, types, depth + 1)?);
                }
                Value::Struct(out)
            }
        },
    })
}

/// Encoding, the mirror of `decode`: what Go's encoder writes for the same value (used to build
/// Owncast-shaped data in tests). Struct and slice types are defined with names given by the caller.
pub mod encode {
    use super::*;

    /// A value to encode, with the Go type names gob puts in its type definitions.
    #[derive(Debug, Clone)]
    pub enum Enc {
        Bool(bool),
        Float(f64),
        Int(i64),
        String(String),
        Bytes(Vec<u8>),
        /// Slice of `elem_type` (the element's shape given by `proto`), and its elements.
        StringSlice(Vec<String>),
        StringMap(Vec<(String, String)>),
        /// A struct: type name, then (field name, value) in declaration order.
        Struct(String, Vec<(String, Enc)>),
        /// A slice of structs of one type: its type name, the field list of the struct type (name and
        /// a prototype value giving the type), and the elements.
        StructSlice(String, Vec<(String, Enc)>, Vec<Vec<(String, Enc)>>),
    }

    fn put_uint(out: &mut Vec<u8>, v: u64) {
        if v < 0x80 {
            out.push(v as u8);
            return;
        }
        let bytes = v.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push((256 - (8 - skip)) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }

    fn put_int(out: &mut Vec<u8>, v: i64) {
        let u = if v < 0 { ((!v as u64) << 1) | 1 } else { (v as u64) << 1 };
        put_uint(out, u);
    }

    fn put_str(out: &mut Vec<u8>, s: &str) {
        put_uint(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }

    struct Types {
        next: i64,
        defs: Vec<Vec<u8>>,
        named: HashMap<String, i64>,
    }

    impl Types {
        /// The CommonType field (delta 1) of a type definition.
        fn common(out: &mut Vec<u8>, name: &str, id: i64) {
            put_uint(out, 1);
            put_uint(out, 1);
            put_str(out, name);
            put_uint(out, 1);
            put_int(out, id);
            put_uint(out, 0);
        }

        fn define(&mut self, name: &str, body: impl FnOnce(&mut Self, i64) -> Vec<u8>) -> i64 {
            if let Some(id) = self.named.get(name) {
                return *id;
            }
            let id = self.next;
            self.next += 1;
            self.named.insert(name.to_string(), id);
            let wire = body(self, id);
            let mut msg = Vec::new();
            put_int(&mut msg, -id);
            msg.extend(wire);
            self.defs.push(msg);
            id
        }

        fn id_of(&mut self, v: &Enc) -> i64 {
            match v {
                Enc::Bool(_) => T_BOOL,
                Enc::Float(_) => T_FLOAT,
                Enc::Int(_) => T_INT,
                Enc::String(_) => T_STRING,
                Enc::Bytes(_) => T_BYTES,
                Enc::StringSlice(_) => self.define("[]string", |_, id| {
                    let mut w = Vec::new();
                    put_uint(&mut w, 2);
                    Self::common(&mut w, "[]string", id);
                    put_uint(&mut w, 1);
                    put_int(&mut w, T_STRING);
                    put_uint(&mut w, 0);
                    put_uint(&mut w, 0);
                    w
                }),
                Enc::StringMap(_) => self.define("map[string]string", |_, id| {
                    let mut w = Vec::new();
                    put_uint(&mut w, 4);
                    Self::common(&mut w, "map[string]string", id);
                    put_uint(&mut w, 1);
                    put_int(&mut w, T_STRING);
                    put_uint(&mut w, 1);
                    put_int(&mut w, T_STRING);
                    put_uint(&mut w, 0);
                    put_uint(&mut w, 0);
                    w
                }),
                Enc::Struct(name, fields) => self.struct_type(name, fields),
                Enc::StructSlice(name, proto, _) => {
                    let elem = self.struct_type(name, proto);
                    let slice_name = format!("[]main.{name}");
                    self.define(&slice_name.clone(), |_, id| {
                        let mut w = Vec::new();
                        put_uint(&mut w, 2);
                        Self::common(&mut w, &slice_name, id);
                        put_uint(&mut w, 1);
                        put_int(&mut w, elem);
                        put_uint(&mut w, 0);
                        put_uint(&mut w, 0);
                        w
                    })
                }
            }
        }

        fn struct_type(&mut self, name: &str, fields: &[(String, Enc)]) -> i64 {
            if let Some(id) = self.named.get(name) {
                return *id;
            }
            // Go defines a struct's id before its fields' types.
            let id = self.next;
            self.next += 1;
            self.named.insert(name.to_string(), id);
            let field_ids: Vec<(String, i64)> = fields.iter().map(|(n, v)| (n.clone(), self.id_of(v))).collect();
            let mut w = Vec::new();
            put_uint(&mut w, 3);
            Self::common(&mut w, name, id);
            put_uint(&mut w, 1);
            put_uint(&mut w, field_ids.len() as u64);
            for (n, fid) in &field_ids {
                put_uint(&mut w, 1);
                put_str(&mut w, n);
                put_uint(&mut w, 1);
                put_int(&mut w, *fid);
                put_uint(&mut w, 0);
            }
            put_uint(&mut w, 0);
            put_uint(&mut w, 0);
            let mut msg = Vec::new();
            put_int(&mut msg, -id);
            msg.extend(w);
            self.defs.push(msg);
            id
        }
    }

    fn is_zero(v: &Enc) -> bool {
        match v {
            Enc::Bool(b) => !b,
            Enc::Float(f) => *f == 0.0,
            Enc::Int(i) => *i == 0,
            Enc::String(s) => s.is_empty(),
            Enc::Bytes(b) => b.is_empty(),
            Enc::StringSlice(v) => v.is_empty(),
            Enc::StringMap(m) => m.is_empty(),
            Enc::StructSlice(_, _, v) => v.is_empty(),
            Enc::Struct(..) => false,
        }
    }

    fn put_value(out: &mut Vec<u8>, v: &Enc) {
        match v {
            Enc::Bool(b) => put_uint(out, u64::from(*b)),
            Enc::Float(f) => put_uint(out, f.to_bits().swap_bytes()),
            Enc::Int(i) => put_int(out, *i),
            Enc::String(s) => put_str(out, s),
            Enc::Bytes(b) => {
                put_uint(out, b.len() as u64);
                out.extend_from_slice(b);
            }
            Enc::StringSlice(items) => {
                put_uint(out, items.len() as u64);
                for s in items {
                    put_str(out, s);
                }
            }
            Enc::StringMap(m) => {
                put_uint(out, m.len() as u64);
                for (k, v) in m {
                    put_str(out, k);
                    put_str(out, v);
                }
            }
            Enc::Struct(_, fields) => put_struct(out, fields),
            Enc::StructSlice(_, _, items) => {
                put_uint(out, items.len() as u64);
                for item in items {
                    put_struct(out, item);
                }
            }
        }
    }

    fn put_struct(out: &mut Vec<u8>, fields: &[(String, Enc)]) {
        let mut last: i64 = -1;
        for (i, (_, v)) in fields.iter().enumerate() {
            if is_zero(v) {
                continue;
            }
            put_uint(out, (i as i64 - last) as u64);
            last = i as i64;
            put_value(out, v);
        }
        put_uint(out, 0);
    }

    /// The gob stream Go's `Encoder.Encode(v)` writes for `v` on a fresh encoder.
    pub fn encode(v: &Enc) -> Vec<u8> {
        let mut types = Types { next: FIRST_USER_TYPE, defs: Vec::new(), named: HashMap::new() };
        let id = types.id_of(v);
        let mut out = Vec::new();
        for def in &types.defs {
            put_uint(&mut out, def.len() as u64);
            out.extend_from_slice(def);
        }
        let mut msg = Vec::new();
        put_int(&mut msg, id);
        if !matches!(v, Enc::Struct(..)) {
            put_uint(&mut msg, 0);
        }
        put_value(&mut msg, v);
        put_uint(&mut out, msg.len() as u64);
        out.extend(msg);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::encode::{encode, Enc};
    use super::*;

    #[test]
    fn decodes_what_go_writes_for_basic_values() {
        // Go: gob.NewEncoder(&b).Encode("hello")
        assert_eq!(decode(b"\x08\x0c\x00\x05hello").unwrap(), Value::String("hello".into()));
        // Encode(42) (an int, zig-zag encoded)
        assert_eq!(decode(&[3, 4, 0, 84]).unwrap(), Value::Int(42));
        // Encode(true), Encode(float64(2)), Encode(float64(2000))
        assert_eq!(decode(b"\x03\x02\x00\x01").unwrap(), Value::Bool(true));
        assert_eq!(decode(b"\x03\x08\x00\x40").unwrap(), Value::Float(2.0));
        assert_eq!(decode(b"\x06\x08\x00\xfd\x40\x9f\x40").unwrap().as_f64(), Some(2000.0));
        assert_eq!(encode(&Enc::String("hello".into())), b"\x08\x0c\x00\x05hello");
        assert_eq!(encode(&Enc::Float(2000.0)), b"\x06\x08\x00\xfd\x40\x9f\x40");
    }

    #[test]
    fn decodes_the_struct_example_of_gos_documentation() {
        // encoding/gob's doc: `type Point struct{ X, Y int }`, Encode(Point{22, 33}):
        // 1f ff 81 03 01 01 05 50 6f 69 6e 74 01 ff 82 00 01 02 01 01 58 01 04 00 01 01 59 01 04 00 00 00
        // 07 ff 82 01 2c 01 42 00
        let mut data = vec![0x1f, 0xff, 0x81, 0x03, 0x01, 0x01, 0x05];
        data.extend(b"Point");
        data.extend([0x01, 0xff, 0x82, 0x00, 0x01, 0x02]);
        data.extend([0x01, 0x01, b'X', 0x01, 0x04, 0x00, 0x01, 0x01, b'Y', 0x01, 0x04, 0x00, 0x00, 0x00]);
        data.extend([0x07, 0xff, 0x82, 0x01, 0x2c, 0x01, 0x42, 0x00]);
        let v = decode(&data).unwrap();
        assert_eq!(v.field("X"), Some(&Value::Int(22)));
        assert_eq!(v.field("Y"), Some(&Value::Int(33)));
        // The encoder writes the same bytes for the same struct.
        let p = encode::Enc::Struct(
            "Point".into(),
            vec![("X".into(), encode::Enc::Int(22)), ("Y".into(), encode::Enc::Int(33))],
        );
        assert_eq!(encode::encode(&p), data);
    }

    #[test]
    fn round_trips_structs_slices_and_maps() {
        let key = |k: &str, c: &str| {
            vec![("Key".to_string(), Enc::String(k.into())), ("Comment".to_string(), Enc::String(c.into()))]
        };
        let v = Enc::StructSlice("StreamKey".into(), key("", ""), vec![key("abc123xyz", "Main"), key("k2", "")]);
        let Value::Slice(items) = decode(&encode(&v)).unwrap() else { panic!("not a slice") };
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].str_field("Key"), "abc123xyz");
        assert_eq!(items[0].str_field("Comment"), "Main");
        assert_eq!(items[1].str_field("Comment"), "");
        let m = Enc::StringMap(vec![("theme-color".into(), "#fff".into())]);
        assert_eq!(
            decode(&encode(&m)).unwrap(),
            Value::Map(vec![(Value::String("theme-color".into()), Value::String("#fff".into()))])
        );
        let s = Enc::Struct(
            "S3".into(),
            vec![("Enabled".into(), Enc::Bool(true)), ("Bucket".into(), Enc::String("b".into()))],
        );
        let d = decode(&encode(&s)).unwrap();
        assert!(d.bool_field("Enabled"));
        assert_eq!(d.str_field("Bucket"), "b");
        let l = Enc::StringSlice(vec!["a".into(), "b".into()]);
        assert_eq!(
            decode(&encode(&l)).unwrap(),
            Value::Slice(vec![Value::String("a".into()), Value::String("b".into())])
        );
    }

    #[test]
    fn corrupt_input_is_an_error_not_a_panic() {
        let good = encode(&Enc::StructSlice(
            "SocialHandle".into(),
            vec![("Platform".into(), Enc::String(String::new()))],
            vec![vec![("Platform".into(), Enc::String("github".into()))]],
        ));
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0xff;
            let _ = decode(&bad);
        }
        assert!(decode(b"\xf8\xff\xff\xff\xff\xff\xff\xff\xff").is_err());
        assert!(decode(b"\x03\x10\x00\x01").is_err()); // type 8 = interface
    }
}
