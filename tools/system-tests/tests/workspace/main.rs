//! Checks of the workspace as a whole: its layout against the docs, what each binary builds,
//! module cycles and function lengths, the product's words, SPEC citations.

mod layout;
mod product_text;
mod spec_citations;
