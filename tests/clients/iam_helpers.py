"""What the broker's client tests check in IAM itself (the emulator), shared by the hvac and
bao suites."""

import boto3
from botocore.exceptions import ClientError


def iam_client(endpoint):
    return boto3.client(
        "iam",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )


def user_exists(iam, name):
    try:
        iam.get_user(UserName=name)
        return True
    except ClientError as error:
        assert error.response["Error"]["Code"] == "NoSuchEntity", error
        return False
