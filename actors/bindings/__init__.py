"""One module (later, one package) per binding; each is a Connector."""
