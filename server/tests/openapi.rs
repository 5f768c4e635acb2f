//! The committed OpenAPI document is the one the routes generate.

#[test]
fn the_committed_openapi_document_is_current() {
    let committed = include_str!("../../schema/openapi.json");
    let generated = openbot_server::http::openapi_json();
    assert!(
        committed.trim_end() == generated.trim_end(),
        "schema/openapi.json is stale: run scripts/openapi and commit the result"
    );
}
