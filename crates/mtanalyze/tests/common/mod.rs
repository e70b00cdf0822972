//! Shared test support: the literal reference implementation of
//! `schemas/semantics.md` and its worked examples.
#![allow(dead_code)]

pub mod fusion;
pub mod reference;
pub mod worked_examples;
