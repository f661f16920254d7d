"""A local Azure Blob Storage service (SharedKey-signed REST on 127.0.0.1) for the az:// store."""

from ._server import AzureBlobServer, RecordedBlobRequest
from ._signing import DEV_ACCOUNT, DEV_ACCOUNT_KEY

__all__ = ["DEV_ACCOUNT", "DEV_ACCOUNT_KEY", "AzureBlobServer", "RecordedBlobRequest"]
