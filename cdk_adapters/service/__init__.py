"""Many endpoints ("cells") as one service: `AdapterService`, placing each adapter family in one
cell, and `ImportedAdapterService`, a tenant stack's view of one deployed elsewhere."""

from cdk_adapters.service.imported import ImportedAdapterService
from cdk_adapters.service.service import AdapterService, ServiceCell

__all__ = ["AdapterService", "ImportedAdapterService", "ServiceCell"]
