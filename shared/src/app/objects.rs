//! dev-server's `PUT /upload/{id}` and `GET /object/{id}`: the HTTP side of local blobs' signed
//! links (uploads and served archives apart, as S3's `upload/` and `object/` prefixes). A bad or
//! expired signature is a 403, a body over the size cap a 413, an unknown object a 404.

use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::Router;

use crate::api::ApiError;
use crate::blobs::{BlobError, BlobStore, LocalBlobs, ObjectId, UploadHooks, UploadRefused, UPLOAD_CONTENT_TYPE};
use crate::errors::Kind;
use crate::links::Signed;
use crate::registry::providers::Landed;
use crate::registry::versions::UPLOAD_LINK_VALIDITY;
use crate::state::AppState;
use crate::state_versions::uploads::Arrival;
use crate::state_versions::Status;
use crate::store::upload_claims;

/// `PUT /upload/{id}` and `GET /object/{id}` for signed links, accepting every validly signed
/// upload.
pub fn object_routes(blobs: LocalBlobs) -> Router {
    object_routes_with_hooks(blobs, Arc::new(AcceptAll))
}

/// The same, with `hooks` deciding whether an upload is wanted and told when one is stored.
pub fn object_routes_with_hooks(blobs: LocalBlobs, hooks: Arc<dyn UploadHooks>) -> Router {
    Router::new()
        .route("/upload/{id}", put(upload))
        .route("/object/{id}", get(download))
        .with_state(Links { blobs, hooks })
}

#[derive(Clone)]
struct Links {
    blobs: LocalBlobs,
    hooks: Arc<dyn UploadHooks>,
}

struct AcceptAll;

#[async_trait]
impl UploadHooks for AcceptAll {
    async fn accepts(&self, _: &ObjectId) -> bool {
        true
    }

    async fn abandoned(&self, _: &ObjectId) {}

    async fn uploaded(&self, _: &ObjectId) -> Result<(), UploadRefused> {
        Ok(())
    }
}

/// dev-server's local links settle their uploads as S3's event does in AWS: the state version or
/// module version a link was made for decides whether it wants the upload (claiming it for that
/// one upload), and settles it once stored, in a task of its own, so that the PUT is answered
/// without waiting.
pub struct SettleUploads(pub AppState);

#[async_trait]
impl UploadHooks for SettleUploads {
    async fn accepts(&self, id: &ObjectId) -> bool {
        let store = self.0.store.as_ref();
        let validity = match crate::state_versions::uploads::awaits_upload(store, id).await {
            Ok(Some(true)) => self.0.config.state_link_lifetime,
            Ok(Some(false)) | Err(_) => return false,
            Ok(None) => match crate::registry::providers::awaits_upload(store, id).await {
                Ok(Some(true)) => crate::registry::providers::UPLOAD_LINK_VALIDITY,
                Ok(Some(false)) | Err(_) => return false,
                Ok(None) => match crate::registry::ingest::awaits_upload(store, id).await {
                    Ok(true) => UPLOAD_LINK_VALIDITY,
                    Ok(false) | Err(_) => return false,
                },
            },
        };
        let expires = chrono::Utc::now().timestamp() + validity.as_secs() as i64;
        upload_claims::claim(store, id.as_str(), expires).await.unwrap_or(false)
    }

    async fn abandoned(&self, id: &ObjectId) {
        if let Err(e) = upload_claims::release(self.0.store.as_ref(), id.as_str()).await {
            tracing::warn!(object = %id, error = %e, "upload claim not released");
        }
    }

    async fn uploaded(&self, id: &ObjectId) -> Result<(), UploadRefused> {
        let state = &self.0;
        // A state is settled before the answer: its writer learns of a refusal, and reads the
        // state it wrote at once.
        let arrival = crate::state_versions::uploads::object_created(state, id).await;
        match arrival {
            Ok(None) => {}
            Ok(Some(Arrival::Refused { reason, .. })) => return Err(UploadRefused::Invalid(reason)),
            Ok(Some(Arrival::Discarded { reason, .. })) => return Err(UploadRefused::Superseded(reason)),
            // Settled meanwhile by a read or write of its workspace: its outcome is the answer.
            Ok(Some(Arrival::Ignored)) => {
                return match crate::state_versions::uploads::status_after(state.store.as_ref(), id).await {
                    Ok(None | Some(Status::Finalized)) => Ok(()),
                    Ok(Some(Status::Discarded)) => {
                        Err(UploadRefused::Superseded("a newer state version superseded it".into()))
                    }
                    Ok(Some(Status::Pending)) => Err(UploadRefused::Invalid(
                        "it was not the state its version declared (see the log); send that state again".into(),
                    )),
                    Err(e) => Err(UploadRefused::Failed(e.to_string())),
                };
            }
            Ok(Some(_)) => return Ok(()),
            Err(e) => {
                tracing::error!(object = %id, error = %e, "settling a state upload failed");
                // The link may take it again.
                let _ = state.blobs.delete(id).await;
                let _ = upload_claims::release(state.store.as_ref(), id.as_str()).await;
                return Err(UploadRefused::Failed(e.to_string()));
            }
        }
        // A provider's file too: it is checked in a moment (an archive within the limits), and
        // its uploader learns of a refusal.
        match crate::registry::providers::object_created(state, id).await {
            Ok(None) => {}
            Ok(Some(Landed::Refused(reason))) => return Err(UploadRefused::Invalid(reason)),
            Ok(Some(Landed::Accepted | Landed::Ignored)) => return Ok(()),
            Err(e) => {
                tracing::error!(object = %id, error = %e, "settling a provider upload failed");
                let _ = state.blobs.delete(id).await;
                let _ = upload_claims::release(state.store.as_ref(), id.as_str()).await;
                return Err(UploadRefused::Failed(e.to_string()));
            }
        }
        let (state, id) = (state.clone(), id.clone());
        tokio::spawn(async move {
            if let Err(e) = crate::jobs::object_created(&state, &id).await {
                tracing::error!(object = %id, error = %e, "settling a local upload failed");
            }
        });
        Ok(())
    }
}

fn authorize(blobs: &LocalBlobs, method: &str, id: &str, link: Option<Query<Signed>>) -> Result<ObjectId, ApiError> {
    let id = ObjectId::parse(id).ok_or_else(ApiError::not_found)?;
    match link {
        Some(Query(link)) if blobs.verify(method, &id, &link) => Ok(id),
        _ => Err(ApiError::forbidden("The link's signature is invalid or has expired.")),
    }
}

async fn download(
    State(Links { blobs, .. }): State<Links>,
    Path(id): Path<String>,
    link: Result<Query<Signed>, QueryRejection>,
) -> Result<Response, ApiError> {
    let id = authorize(&blobs, "GET", &id, link.ok())?;
    let reader = blobs.open(&id).await.map_err(blob_error)?;
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(reader.into_async()));
    Ok(([(header::CONTENT_TYPE, UPLOAD_CONTENT_TYPE)], body).into_response())
}

async fn upload(
    State(Links { blobs, hooks }): State<Links>,
    Path(id): Path<String>,
    link: Result<Query<Signed>, QueryRejection>,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let id = authorize(&blobs, "PUT", &id, link.ok())?;
    if !hooks.accepts(&id).await {
        return Err(ApiError::conflict("This upload link has been used: its version already has what it takes."));
    }
    if let Err(e) = blobs.receive(&id, body.into_data_stream()).await {
        hooks.abandoned(&id).await;
        return Err(blob_error(e));
    }
    match hooks.uploaded(&id).await {
        Ok(()) => Ok(StatusCode::OK),
        Err(UploadRefused::Invalid(reason)) => Err(ApiError::new(Kind::Invalid, "invalid upload", reason)),
        Err(UploadRefused::Superseded(reason)) => Err(ApiError::conflict(format!("The state was not kept: {reason}"))),
        Err(UploadRefused::Failed(reason)) => Err(ApiError::internal(reason)),
    }
}

fn blob_error(e: BlobError) -> ApiError {
    match e {
        BlobError::NotFound => ApiError::not_found(),
        BlobError::TooLarge { .. } => ApiError::new(Kind::TooLarge, "payload too large", format!("The {e}.")),
        BlobError::Interrupted(_) => ApiError::bad_request(e.to_string()),
        BlobError::AlreadyStored => {
            ApiError::conflict("This upload link has been used: its version already has what it takes.")
        }
        BlobError::Backend(_) => ApiError::internal(e),
    }
}
