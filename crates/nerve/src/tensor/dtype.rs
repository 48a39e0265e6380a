//! [`DType`]: the element types a tensor may hold, by numpy's names.

use std::fmt;

/// The element type of a tensor. Stored in descriptors and in the pool as its
/// [`code`](DType::code); [`name`](DType::name) is numpy's name for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DType {
    /// `uint8`
    U8 = 1,
    /// `int8`
    I8 = 2,
    /// `uint16`
    U16 = 3,
    /// `int16`
    I16 = 4,
    /// `uint32`
    U32 = 5,
    /// `int32`
    I32 = 6,
    /// `uint64`
    U64 = 7,
    /// `int64`
    I64 = 8,
    /// `float16` (IEEE 754 half precision)
    F16 = 9,
    /// `float32`
    F32 = 10,
    /// `float64`
    F64 = 11,
    /// `bool` (one byte, 0 or 1)
    Bool = 12,
}

impl DType {
    /// Every element type, in code order.
    pub const ALL: [DType; 12] = [
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::U32,
        DType::I32,
        DType::U64,
        DType::I64,
        DType::F16,
        DType::F32,
        DType::F64,
        DType::Bool,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::U8 | DType::I8 | DType::Bool => 1,
            DType::U16 | DType::I16 | DType::F16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }

    /// numpy's name of the type (`"float32"`, `"uint8"`, `"bool"`…).
    pub const fn name(self) -> &'static str {
        match self {
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::U16 => "uint16",
            DType::I16 => "int16",
            DType::U32 => "uint32",
            DType::I32 => "int32",
            DType::U64 => "uint64",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::Bool => "bool",
        }
    }

    /// The type with numpy's name `name` (exactly as [`DType::name`] writes it).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The code stored in descriptors and in the pool (1 to 12; 0 is no type).
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The type stored as `code`, if it is one.
    pub fn from_code(code: u8) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.code() == code)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
