//! dev-server on DynamoDB and S3 ingests uploads as AWS does: the bucket sends its ObjectCreated
//! events for `upload/` to an SQS queue, and dev-server long-polls that queue and hands each
//! event to `hangar::jobs::ingest`, the handler the `registry-ingest` function runs. With
//! `--init` the queue and the bucket's notification are created; without it the queue must exist.

use std::time::Duration;

use aws_lambda_events::event::s3::S3Event;
use aws_sdk_s3::operation::get_bucket_notification_configuration::GetBucketNotificationConfigurationOutput;
use aws_sdk_s3::types::{
    Event, FilterRule, FilterRuleName, NotificationConfiguration, NotificationConfigurationFilter, QueueConfiguration,
    S3KeyFilter,
};
use aws_sdk_sqs::types::QueueAttributeName;
use hangar::blobs::UPLOAD_PREFIX;
use hangar::state::AppState;

/// The id of the bucket notification dev-server manages (others are left alone).
const NOTIFICATION_ID: &str = "hangar-uploads";
/// How long a received event stays hidden from other pollers: as long as the ingest function
/// may run in AWS. An event whose ingest fails comes back after it and is tried again.
const VISIBILITY_TIMEOUT_SECONDS: &str = "300";
/// SQS's longest long poll.
const WAIT_SECONDS: i32 = 20;

#[derive(Debug, thiserror::Error)]
#[error("upload queue {queue}: {message}")]
pub struct QueueError {
    queue: String,
    message: String,
}

/// The queue that receives the bucket's upload events.
pub struct UploadQueue {
    sqs: aws_sdk_sqs::Client,
    url: String,
}

impl UploadQueue {
    /// Finds the queue `name`; with `init`, creates it and has `bucket` send its upload events to
    /// it (keeping the bucket's other notifications).
    pub async fn connect(
        sdk: &aws_config::SdkConfig,
        name: &str,
        bucket: &str,
        init: bool,
    ) -> Result<Self, QueueError> {
        let error = |message: String| QueueError { queue: name.to_owned(), message };
        let sqs = aws_sdk_sqs::Client::new(sdk);
        let url = if init {
            let created = sqs
                .create_queue()
                .queue_name(name)
                .attributes(QueueAttributeName::VisibilityTimeout, VISIBILITY_TIMEOUT_SECONDS)
                .send()
                .await
                .map_err(|e| error(sdk_message(&e)))?;
            created.queue_url().ok_or_else(|| error("created without a URL".into()))?.to_owned()
        } else {
            match sqs.get_queue_url().queue_name(name).send().await {
                Ok(found) => found.queue_url().ok_or_else(|| error("found without a URL".into()))?.to_owned(),
                Err(e) if e.as_service_error().is_some_and(|e| e.is_queue_does_not_exist()) => {
                    return Err(error(
                        "no such queue: start with --init to create it, or set HANGAR_UPLOAD_QUEUE to an empty \
                         value when something else ingests the bucket's uploads"
                            .into(),
                    ))
                }
                Err(e) => return Err(error(sdk_message(&e))),
            }
        };
        if init {
            let s3_config =
                aws_sdk_s3::config::Builder::from(sdk).force_path_style(sdk.endpoint_url().is_some()).build();
            let s3 = aws_sdk_s3::Client::from_conf(s3_config);
            notify(&sqs, &s3, &url, bucket).await.map_err(error)?;
        }
        Ok(Self { sqs, url })
    }

    /// Polls for ever: each event is ingested, then deleted from the queue; one that fails
    /// stays, and comes back after the visibility timeout.
    pub async fn run(self, state: AppState) {
        loop {
            let received = self
                .sqs
                .receive_message()
                .queue_url(&self.url)
                .max_number_of_messages(10)
                .wait_time_seconds(WAIT_SECONDS)
                .send()
                .await;
            let messages = match received {
                Ok(received) => received.messages.unwrap_or_default(),
                Err(e) => {
                    tracing::warn!(error = %sdk_message(&e), "receiving upload events failed; retrying");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    continue;
                }
            };
            for message in messages {
                if ingest(&state, message.body().unwrap_or_default()).await {
                    let receipt = message.receipt_handle().unwrap_or_default();
                    if let Err(e) = self.sqs.delete_message().queue_url(&self.url).receipt_handle(receipt).send().await
                    {
                        tracing::warn!(error = %sdk_message(&e), "an ingested upload event was not deleted");
                    }
                }
            }
        }
    }
}

/// Ingests one message's event; whether it is done with (S3's test event, and anything that is
/// not an S3 event, are: they would never read better).
async fn ingest(state: &AppState, body: &str) -> bool {
    let mut event: serde_json::Value = match serde_json::from_str(body) {
        Ok(event) => event,
        Err(e) => {
            tracing::warn!(error = %e, "an upload queue message that is not JSON; dropped");
            return true;
        }
    };
    let Some(records) = event.get_mut("Records").and_then(serde_json::Value::as_array_mut) else {
        tracing::debug!(body, "not an S3 event (S3 sends a test event when notifications are set up)");
        return true;
    };
    // AWS always sends these two; an emulator (moto) may leave them out.
    for record in records.iter_mut().filter_map(serde_json::Value::as_object_mut) {
        for field in ["userIdentity", "requestParameters"] {
            record.entry(field).or_insert_with(|| serde_json::json!({}));
        }
    }
    let event: S3Event = match serde_json::from_value(event) {
        Ok(event) => event,
        Err(e) => {
            tracing::warn!(error = %e, body, "an upload event not in S3's shape; dropped");
            return true;
        }
    };
    match hangar::jobs::ingest(state, event).await {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(error = %e, "ingest of an upload event failed; it is retried");
            false
        }
    }
}

/// Lets the bucket send to the queue, and points the bucket's ObjectCreated events under
/// `upload/` at it: the same events and prefix as template.yaml's `registry-ingest` trigger.
async fn notify(sqs: &aws_sdk_sqs::Client, s3: &aws_sdk_s3::Client, url: &str, bucket: &str) -> Result<(), String> {
    let attributes =
        sqs.get_queue_attributes().queue_url(url).attribute_names(QueueAttributeName::QueueArn).send().await;
    let attributes = attributes.map_err(|e| sdk_message(&e))?;
    let queue_arn = attributes
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn))
        .ok_or("the queue has no ARN")?
        .clone();
    let partition = queue_arn.split(':').nth(1).unwrap_or("aws");
    let bucket_arn = format!("arn:{partition}:s3:::{bucket}");
    let policy = serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": "s3.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
            "Condition": {"ArnEquals": {"aws:SourceArn": bucket_arn}},
        }],
    });
    let allowed = sqs.set_queue_attributes().queue_url(url).attributes(QueueAttributeName::Policy, policy.to_string());
    allowed.send().await.map_err(|e| sdk_message(&e))?;

    let prefix = FilterRule::builder().name(FilterRuleName::Prefix).value(UPLOAD_PREFIX).build();
    let filter = NotificationConfigurationFilter::builder().key(S3KeyFilter::builder().filter_rules(prefix).build());
    let ours = QueueConfiguration::builder()
        .id(NOTIFICATION_ID)
        .queue_arn(&queue_arn)
        // Single PUTs (upload links, VCS fetches) and multipart completions; not copies, which
        // ingest makes into `object/` anyway.
        .events(Event::S3ObjectCreatedPut)
        .events(Event::S3ObjectCreatedCompleteMultipartUpload)
        .filter(filter.build())
        .build()
        .map_err(|e| e.to_string())?;
    let current = match s3.get_bucket_notification_configuration().bucket(bucket).send().await {
        Ok(current) => current,
        // moto answers a bucket without notifications in a shape the SDK cannot read (an error
        // with no code); there is nothing to keep then. Real errors (denied, no bucket) have one.
        Err(e) if e.as_service_error().is_some_and(|e| e.meta().code().is_none()) => {
            GetBucketNotificationConfigurationOutput::builder().build()
        }
        Err(e) => return Err(sdk_message(&e)),
    };
    let mut queues: Vec<QueueConfiguration> =
        current.queue_configurations().iter().filter(|q| q.id() != Some(NOTIFICATION_ID)).cloned().collect();
    queues.push(ours);
    let configuration = NotificationConfiguration::builder()
        .set_queue_configurations(Some(queues))
        .set_topic_configurations(current.topic_configurations)
        .set_lambda_function_configurations(current.lambda_function_configurations)
        .set_event_bridge_configuration(current.event_bridge_configuration)
        .build();
    let put = s3.put_bucket_notification_configuration().bucket(bucket).notification_configuration(configuration);
    put.send().await.map_err(|e| sdk_message(&e))?;
    Ok(())
}

fn sdk_message<E: std::error::Error + 'static>(e: &E) -> String {
    aws_sdk_sqs::error::DisplayErrorContext(e).to_string()
}
