"""The canonical store on embedded Kùzu: memories, scopes, entities and the change log in one graph."""
