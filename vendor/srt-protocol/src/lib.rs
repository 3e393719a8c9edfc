// castd: upstream code as released; its own warnings are not castd's to fix (see CASTD-CHANGES.md).
#![allow(warnings)]

pub mod access;
pub mod connection;
pub mod listener;
pub mod options;
pub mod packet;
pub mod protocol;
pub mod settings;
pub mod statistics;
