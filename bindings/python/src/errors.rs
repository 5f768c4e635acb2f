//! Core errors as Python exceptions.
//!
//! The exception classes are Python classes (`openbot.errors`); the package registers them
//! here once at import, one per stable error code, and every [`Error`] becomes an instance of
//! the class of its code with `code`, `category` and `error_id` set.

use std::collections::HashMap;

use openbot_core::Error;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};

/// The registered classes: the base class and one class per code.
struct Classes {
    base: Py<PyType>,
    by_code: HashMap<String, Py<PyType>>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

/// Registers the exception classes: `base` for codes without a class of their own, and
/// `by_code` mapping each stable code (`not_found`, ...) to its class. Called once by the
/// package at import; a second call changes nothing.
#[pyfunction]
pub fn register_errors(
    py: Python<'_>,
    base: Bound<'_, PyType>,
    by_code: Bound<'_, PyDict>,
) -> PyResult<()> {
    let mut map = HashMap::new();
    for (code, class) in by_code.iter() {
        map.insert(
            code.extract::<String>()?,
            class.cast_into::<PyType>()?.unbind(),
        );
    }
    let _ = CLASSES.set(
        py,
        Classes {
            base: base.unbind(),
            by_code: map,
        },
    );
    Ok(())
}

/// The Python exception of a core error.
pub fn to_py(error: Error) -> PyErr {
    Python::attach(|py| make(py, &error)).unwrap_or_else(|e| e)
}

fn make(py: Python<'_>, error: &Error) -> PyResult<PyErr> {
    let Some(classes) = CLASSES.get(py) else {
        return Ok(PyRuntimeError::new_err(error.to_string()));
    };
    let code = error.code.as_str();
    let class = classes.by_code.get(code).unwrap_or(&classes.base);
    let kwargs = PyDict::new(py);
    kwargs.set_item("code", code)?;
    kwargs.set_item(
        "category",
        error
            .category
            .map(|c| serde_json::to_value(c).ok())
            .and_then(|v| v.and_then(|v| v.as_str().map(str::to_owned))),
    )?;
    kwargs.set_item("error_id", error.error_id.map(|id| id.to_string()))?;
    let value = class
        .bind(py)
        .call((error.message.clone(),), Some(&kwargs))?;
    Ok(PyErr::from_value(value))
}

/// An `invalid_input` error for a value that cannot be read as `what`.
pub fn invalid(what: &str, detail: impl std::fmt::Display) -> PyErr {
    to_py(Error::invalid_input(format!("invalid {what}: {detail}")))
}
