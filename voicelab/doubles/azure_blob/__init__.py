"""A local Azure Blob Storage service (SharedKey-signed REST on 127.0.0.1) for the az:// store."""

from ._server import AzureBlobServer, RecordedBlobRequest
from ._signing import DEV_ACCOUNT, DEV_ACCOUNT_KEY

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
