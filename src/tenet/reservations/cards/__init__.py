"""Task card field contracts: the definitions provider, the P0 contract, validation and prefill."""
