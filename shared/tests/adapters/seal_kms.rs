//! `KmsSealer` against KMS on the moto emulator (see `support`): the broker's secrets in AWS are
//! sealed only this way, and what KMS refuses (a foreign or altered blob, a value sealed without
//! the broker's encryption context) must come back as an error, never as a secret.

use crate::support;

use aws_sdk_kms::primitives::Blob;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hangar::seal::{KmsSealer, SealError, Sealer, SharedSealer};

const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

/// A KMS client on the emulator (a failure when none is configured).
async fn kms() -> aws_sdk_kms::Client {
    aws_sdk_kms::Client::new(&support::moto().await.sdk)
}

/// A new symmetric key: its id and ARN.
async fn create_key(client: &aws_sdk_kms::Client) -> (String, String) {
    let created = client.create_key().description("hangar seal test").send().await.expect("create a KMS key");
    let metadata = created.key_metadata().expect("key metadata");
    (metadata.key_id().to_owned(), metadata.arn().expect("key ARN").to_owned())
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn round_trip_by_id_arn_and_alias() {
    let client = kms().await;
    let (key_id, arn) = create_key(&client).await;
    let alias = format!("alias/{}", support::unique_name("hangar-seal"));
    client.create_alias().alias_name(&alias).target_key_id(&key_id).send().await.expect("create an alias");

    let sealers: Vec<SharedSealer> = [key_id, arn, alias]
        .into_iter()
        .map(|key| -> SharedSealer { std::sync::Arc::new(KmsSealer::new(client.clone(), key)) })
        .collect();
    for sealer in &sealers {
        let sealed = sealer.seal(SECRET).await.expect("seal");
        assert!(BASE64.decode(&sealed).is_ok(), "{sealed}");
        assert!(!sealed.contains(SECRET));
        for other in &sealers {
            assert_eq!(other.unseal(&sealed).await.expect("unseal"), SECRET);
        }
    }
    let unicode = "naïve ✓ secret";
    assert_eq!(sealers[0].unseal(&sealers[0].seal(unicode).await.unwrap()).await.unwrap(), unicode);
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn two_seals_of_one_value_differ() {
    let client = kms().await;
    let (key_id, _) = create_key(&client).await;
    let sealer = KmsSealer::new(client, key_id);
    let first = sealer.seal(SECRET).await.unwrap();
    let second = sealer.seal(SECRET).await.unwrap();
    assert_ne!(first, second);
    assert_eq!(sealer.unseal(&second).await.unwrap(), SECRET);
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn altered_blob_is_corrupt() {
    let client = kms().await;
    let (key_id, _) = create_key(&client).await;
    let sealer = KmsSealer::new(client, key_id);
    let mut blob = BASE64.decode(sealer.seal(SECRET).await.unwrap()).unwrap();
    *blob.last_mut().unwrap() ^= 0x01;
    let result = sealer.unseal(&BASE64.encode(&blob)).await;
    assert!(matches!(result, Err(SealError::Corrupt)), "{result:?}");
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn garbage_is_corrupt() {
    let client = kms().await;
    let (key_id, _) = create_key(&client).await;
    let sealer = KmsSealer::new(client, key_id);
    for input in [String::new(), "not base64 at all!".to_owned(), BASE64.encode([0x5a; 16])] {
        let result = sealer.unseal(&input).await;
        assert!(matches!(result, Err(SealError::Corrupt)), "{input:?}: {result:?}");
    }
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn value_encrypted_without_the_broker_context_is_corrupt() {
    let client = kms().await;
    let (key_id, _) = create_key(&client).await;
    let plain = client
        .encrypt()
        .key_id(&key_id)
        .plaintext(Blob::new(SECRET.as_bytes()))
        .send()
        .await
        .expect("encrypt without a context");
    let sealed = BASE64.encode(plain.ciphertext_blob().expect("ciphertext").as_ref());
    let result = KmsSealer::new(client, key_id).unseal(&sealed).await;
    assert!(matches!(result, Err(SealError::Corrupt)), "{result:?}");
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn value_sealed_under_another_key_is_refused() {
    let client = kms().await;
    let (ours, _) = create_key(&client).await;
    let (theirs, _) = create_key(&client).await;
    let sealed = KmsSealer::new(client.clone(), theirs).seal(SECRET).await.unwrap();
    let result = KmsSealer::new(client, ours).unseal(&sealed).await;
    // KMS answers IncorrectKeyException (Corrupt); moto answers AccessDeniedException instead.
    assert!(matches!(result, Err(SealError::Corrupt | SealError::Kms(_))), "{result:?}");
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn unknown_key_is_a_kms_error() {
    let client = kms().await;
    let sealer = KmsSealer::new(client, "alias/hangar-seal-does-not-exist");
    let result = sealer.seal(SECRET).await;
    assert!(matches!(result, Err(SealError::Kms(_))), "{result:?}");
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_bound_value_opens_only_for_its_kind_and_record() {
    use hangar::seal::SealContext;
    let client = kms().await;
    let (key_id, _) = create_key(&client).await;
    let sealer = KmsSealer::new(client, key_id);
    let context = SealContext::broker_root_key("mount-one");
    let sealed = sealer.seal_for(&context, SECRET).await.unwrap();
    assert!(sealed.starts_with("v2:") && !sealed.contains(SECRET), "{sealed}");
    assert_eq!(sealer.unseal_for(&context, &sealed).await.unwrap(), SECRET);
    for other in [
        SealContext::broker_root_key("mount-two"),
        SealContext::static_role_key("mount-one", "role"),
        SealContext::oauth_token("mount-one"),
    ] {
        let result = sealer.unseal_for(&other, &sealed).await;
        assert!(matches!(result, Err(SealError::Corrupt | SealError::Kms(_))), "{other:?}: {result:?}");
    }
    assert!(matches!(sealer.unseal(&sealed).await, Err(SealError::Corrupt)), "a bound value needs its context");
    let relabelled = sealed.trim_start_matches("v2:");
    assert!(sealer.unseal_for(&context, relabelled).await.is_err(), "nor does it open as format 1");
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_value_sealed_before_contexts_still_opens_for_any() {
    use hangar::seal::SealContext;
    let client = kms().await;
    let (key_id, _) = create_key(&client).await;
    let sealer = KmsSealer::new(client, key_id);
    let before = sealer.seal(SECRET).await.unwrap();
    assert!(BASE64.decode(&before).is_ok(), "format 1 is the bare base64: {before}");
    for context in [SealContext::oauth_token("ot-one"), SealContext::webhook_secret("hook")] {
        assert_eq!(sealer.unseal_for(&context, &before).await.unwrap(), SECRET);
    }
}
